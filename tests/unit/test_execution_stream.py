"""The execution stream (server-sent events) over the in-process services: cursors, resuming
with Last-Event-ID, the end of a finished execution, and its errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse
from pymongo.errors import ServerSelectionTimeoutError

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.gateway.auth import KeyRechecks
from services.gateway.stream_events import StreamCursor
from shared.store.api_keys import ApiKey, Role, create_key
from shared.store.memory.api_keys import InMemoryApiKeys
from tests.eventually import eventually
from tests.live_gateway import served
from tests.unit.inprocess import World

STREAM = "/api/v1/projects/p1/executions/{}/stream"


@asynccontextmanager
async def gateway(
    world: World, monkeypatch: pytest.MonkeyPatch, secret: str | None = None, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway on the world's store (``settings`` over the defaults), called with ``secret``
    (a fresh owner key of p1 by default)."""
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", **settings)
    app = create_app(built, store=world.store, publisher=world.bus)
    if secret is None:
        _, secret = await create_key(
            world.store.api_keys, project_id="p1", role=Role.OWNER, name="t"
        )
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway", headers=headers
    ) as client:
        yield client


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway(world, monkeypatch) as client:
        yield client


async def events_of(
    http: httpx.AsyncClient, execution_id: str, last_event_id: str | None = None
) -> list[tuple[str, str, Any]]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    url = STREAM.format(execution_id)
    params = {"workspace_id": "w1"}
    async with aconnect_sse(http, "GET", url, params=params, headers=headers) as source:
        assert source.response.status_code == 200
        return [(e.event, e.id, json.loads(e.data)) async for e in source.aiter_sse() if e.data]


async def finished_refund(world: World) -> str:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    await world.decide(started.execution_id, "approve", "ok")
    return started.execution_id


async def test_a_finished_execution_streams_its_progress_and_history_then_ends(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id = await finished_refund(world)
    events = await events_of(http, execution_id)
    kinds = [kind for kind, _, _ in events]
    updates = [data["node"] for kind, _, data in events if kind == "update"]
    assert updates == ["lookup_claim", "review", "issue_refund"]
    statuses = [data["to_status"] for kind, _, data in events if kind == "status"]
    assert statuses == ["pending", "running", "suspended", "resuming", "running", "completed"]
    assert kinds[-1] == "end" and events[-1][2]["result"]["outcome"] == "refunded"
    # The review request belongs to the current suspension only; this one was answered.
    assert "interrupt" not in kinds
    ids = [StreamCursor.parse(event_id) for _, event_id, _ in events]
    assert ids == sorted(ids, key=lambda c: (c.audit, c.progress))


async def test_last_event_id_resumes_after_that_event(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id = await finished_refund(world)
    events = await events_of(http, execution_id)
    for cut in range(1, len(events)):
        last_seen = events[cut - 1][1]
        # An end event shares its status's id: a client that has the status has the end too.
        expected = [e for e in events[cut:] if e[1] != last_seen]
        if expected:
            assert await events_of(http, execution_id, last_event_id=last_seen) == expected, cut
        else:
            response = await http.get(
                STREAM.format(execution_id),
                params={"workspace_id": "w1"},
                headers={"Last-Event-ID": last_seen},
            )
            assert response.status_code == 204


async def test_a_client_that_saw_the_end_is_told_to_stop_reconnecting(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id = await finished_refund(world)
    last = (await events_of(http, execution_id))[-1][1]
    response = await http.get(
        STREAM.format(execution_id), params={"workspace_id": "w1"}, headers={"Last-Event-ID": last}
    )
    assert response.status_code == 204  # EventSource stops on 204


async def test_a_suspended_execution_streams_the_review_request(
    world: World, http: httpx.AsyncClient
) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    headers = {"Last-Event-ID": "0/999999.9999.999999"}  # all progress seen: only the history
    url = STREAM.format(started.execution_id)
    # The stream of a suspended execution stays open: read until the interrupt, then leave.
    # httpx's ASGI transport returns a body only once the app finishes, so serve it for real.
    async with (
        served(http) as live,
        aconnect_sse(live, "GET", url, params={"workspace_id": "w1"}, headers=headers) as source,
    ):
        seen = []
        async for event in source.aiter_sse():
            if event.data:
                seen.append((event.event, json.loads(event.data)))
            if event.event == "interrupt":
                break
    statuses = [data["to_status"] for kind, data in seen if kind == "status"]
    assert statuses == ["pending", "running", "suspended"]
    assert "dispatched" in [data["action"] for kind, data in seen if kind == "audit"]
    assert seen[-2][0] == "status" and seen[-1][0] == "interrupt"
    review = seen[-1][1]
    assert review["suspend_context"]["claim_id"] == "CLM-4821"
    assert review["allowed_decisions"] == ["approve", "reject"]
    assert review["generation"] == 1


@pytest.mark.parametrize(
    "bad", ["nonsense", "3", "3/12", "-1/", "1/000001.0001.00000x", "9" * 12 + "/"]
)
async def test_a_malformed_last_event_id_is_a_400(
    world: World, http: httpx.AsyncClient, bad: str
) -> None:
    execution_id = await finished_refund(world)
    response = await http.get(
        STREAM.format(execution_id), params={"workspace_id": "w1"}, headers={"Last-Event-ID": bad}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"].endswith("/invalid-last-event-id")


async def test_unknown_foreign_and_unauthenticated_streams_are_refused(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id = await finished_refund(world)
    missing = await http.get(STREAM.format("no-such-execution"), params={"workspace_id": "w1"})
    assert missing.status_code == 404
    other_workspace = await http.get(STREAM.format(execution_id), params={"workspace_id": "w2"})
    assert other_workspace.status_code == 404
    _, foreign = await create_key(world.store.api_keys, project_id="p2", role=Role.OWNER, name="x")
    url = STREAM.format(execution_id).replace("/p1/", "/p2/")
    stranger = await http.get(
        url, params={"workspace_id": "w1"}, headers={"Authorization": f"Bearer {foreign}"}
    )
    assert stranger.status_code == 404
    anonymous = await http.get(
        STREAM.format(execution_id), params={"workspace_id": "w1"}, headers={"Authorization": ""}
    )
    assert anonymous.status_code == 401


async def test_until_suspended_closes_the_stream_after_the_review_request(
    world: World, http: httpx.AsyncClient
) -> None:
    started = await world.invoke("chain-approval", "2")
    url = STREAM.format(started.execution_id)
    params = {"workspace_id": "w1", "until": "suspended"}
    async with aconnect_sse(http, "GET", url, params=params) as source:
        first = [(e.event, e.id) async for e in source.aiter_sse() if e.data]
    assert first[-1][0] == "interrupt"
    await world.decide(started.execution_id, "approve")
    headers = {"Last-Event-ID": first[-1][1]}
    async with aconnect_sse(http, "GET", url, params=params, headers=headers) as source:
        second = [(e.event, json.loads(e.data)) async for e in source.aiter_sse() if e.data]
    # The second suspension's request, and nothing of the first one again.
    assert second[-1][0] == "interrupt" and second[-1][1]["generation"] == 2
    assert [d["to_status"] for k, d in second if k == "status"] == [
        "resuming",
        "running",
        "suspended",
    ]


# --- bounded streams (issue 17): revocation, a cap per key, a lifetime --------------------------


def key_id(http: httpx.AsyncClient) -> str:
    return http.headers["authorization"].split("_")[1]


async def read_to_interrupt(events: AsyncIterator[ServerSentEvent]) -> list[tuple[str, str]]:
    """Read ``events`` up to the review request. Keep ``events`` referenced while the stream
    should stay open: httpx closes the connection once the iterator is collected."""
    seen = []
    async for event in events:
        if event.data:
            seen.append((event.event, event.id))
        if event.event == "interrupt":
            break
    return seen


async def test_a_revoked_keys_open_stream_closes_and_cannot_reopen(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    url = STREAM.format(started.execution_id)
    quick = {"stream_key_check_seconds": 0.05}
    async with (
        gateway(world, monkeypatch, **quick) as http,
        served(http) as live,
        aconnect_sse(live, "GET", url, params={"workspace_id": "w1"}) as source,
    ):
        events = source.aiter_sse()
        seen = await read_to_interrupt(events)
        assert seen[-1][0] == "interrupt"
        assert await world.store.api_keys.revoke("p1", key_id(http))
        # The stream of a suspended execution would stay open; the revocation ends it.
        after = [event async for event in events if event.data]
        assert after == []
        again = await live.get(
            url, params={"workspace_id": "w1"}, headers={"Last-Event-ID": seen[-1][1]}
        )
        assert again.status_code == 401


async def test_key_rechecks_read_each_key_once_per_interval_however_many_streams() -> None:
    keys = InMemoryApiKeys()
    key, _ = await create_key(keys, project_id="p1", role=Role.OWNER, name="t")
    gate = asyncio.Event()
    reads: list[str] = []

    class SlowKeys(InMemoryApiKeys):
        async def get(self, key_id: str) -> ApiKey | None:
            reads.append(key_id)
            await gate.wait()
            return await keys.get(key_id)

    now = [100.0]
    rechecks = KeyRechecks(SlowKeys(), interval=5.0, clock=lambda: now[0])
    waiting = [asyncio.create_task(rechecks.still_valid(key)) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*waiting) == [True] * 50
    assert reads == [key.key_id]
    now[0] += 4.9
    assert await rechecks.still_valid(key)
    assert reads == [key.key_id]  # within the interval: the answer read before
    await keys.revoke("p1", key.key_id)
    now[0] += 0.1
    assert not await rechecks.still_valid(key)
    assert reads == [key.key_id] * 2


async def test_a_failed_recheck_is_not_remembered() -> None:
    keys = InMemoryApiKeys()
    key, _ = await create_key(keys, project_id="p1", role=Role.OWNER, name="t")
    failures = [ServerSelectionTimeoutError("no primary")]

    class FlakyKeys(InMemoryApiKeys):
        async def get(self, key_id: str) -> ApiKey | None:
            if failures:
                raise failures.pop()
            return await keys.get(key_id)

    rechecks = KeyRechecks(FlakyKeys(), interval=60.0)
    with pytest.raises(ServerSelectionTimeoutError):
        await rechecks.still_valid(key)
    assert await rechecks.still_valid(key)


async def test_streams_past_the_per_key_cap_are_429_and_a_closed_one_frees_its_slot(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    url = STREAM.format(started.execution_id)
    params = {"workspace_id": "w1"}
    async with (
        gateway(world, monkeypatch, stream_max_per_key=2) as http,
        served(http) as live,
    ):
        first = aconnect_sse(live, "GET", url, params=params)
        second = aconnect_sse(live, "GET", url, params=params)
        async with first as one, second as two:
            open_streams = [one.aiter_sse(), two.aiter_sse()]
            for events in open_streams:
                assert (await read_to_interrupt(events))[-1][0] == "interrupt"
            refused = await live.get(url, params=params)
            assert refused.status_code == 429
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["type"].endswith("/too-many-streams")
            assert int(refused.headers["retry-after"]) >= 1
            # The cap is per key: another key of the project still gets its stream.
            _, other = await create_key(
                world.store.api_keys, project_id="p1", role=Role.READ_ONLY, name="o"
            )
            headers = {"Authorization": f"Bearer {other}"}
            async with aconnect_sse(live, "GET", url, params=params, headers=headers) as three:
                assert three.response.status_code == 200

        async def reopened() -> int:
            async with aconnect_sse(live, "GET", url, params=params) as source:
                return source.response.status_code

        # Both closed: their slots come back once the server has seen them go.
        await eventually(reopened, lambda status: status == 200, what="a freed slot")


async def test_a_stream_at_the_end_of_its_lifetime_resumes_exactly_where_it_stopped(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await world.invoke("chain-approval", "2")
    execution_id = started.execution_id
    pieces: list[list[tuple[str, str, Any]]] = []
    async with gateway(world, monkeypatch, stream_max_seconds=1e-9) as short:
        last: str | None = None

        async def reconnect() -> None:
            nonlocal last
            events = await events_of(short, execution_id, last_event_id=last)
            if events:
                last = events[-1][1]
            pieces.append(events)

        # Each connection outlives its lifetime at once: it sends what there is and closes.
        await reconnect()
        await reconnect()
        assert pieces[-1] == []  # nothing new while suspended
        await world.decide(execution_id, "approve")
        await reconnect()
        await world.decide(execution_id, "approve")
        await reconnect()
        assert pieces[-1][-1][0] == "end"
    async with gateway(world, monkeypatch) as whole:
        everything = await events_of(whole, execution_id)
    joined = [event for piece in pieces for event in piece]
    # Each connection sends its progress, then its history: across several connections the two
    # sources interleave differently than in one (so the ids, which carry both cursors, differ),
    # but each source arrives whole, in order, once. The review requests came while the
    # execution waited (one stream of the finished execution has none).
    for source in ({"update", "token"}, {"status", "audit", "end"}):
        assert [(kind, data) for kind, _, data in joined if kind in source] == [
            (kind, data) for kind, _, data in everything if kind in source
        ]
    cursors = [StreamCursor.parse(event_id) for _, event_id, _ in joined]
    assert [c.audit for c in cursors] == sorted(c.audit for c in cursors)
    assert [c.progress for c in cursors] == sorted(c.progress for c in cursors)
    assert [e[2]["generation"] for e in joined if e[0] == "interrupt"] == [1, 2]
    assert {e[0] for e in everything} <= {"update", "token", "status", "audit", "end"}
