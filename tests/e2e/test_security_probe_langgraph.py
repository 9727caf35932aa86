"""Issue 31's second probe, findings 2, 3, 4 and 7, as the attacks, on the four services as
separate processes over Kafka and FerretDB, through the LangGraph routes:

- 35 concurrent joins with one read-only key were all held (the execution streams' cap of 20
  held): now the joins past the cap are 429, the waits and streams too;
- a join opened by a key revoked 9 s earlier still answered 200 with the final state (the refund
  id) once another owner approved: now it ends within the key re-check;
- a key confined to ``ws2`` invoked with ``Idempotency-Key: langgraph-thread:<thread>`` and then
  found the other workspace's thread record, metadata included, by ``threads/search``; creating
  that id answered 409 (an existence oracle), and an id created in one workspace blocked the
  other from creating it: now a workspace sees only its threads, and an id used elsewhere is as
  free as a new one;
- a resume naming ``sql-ops`` on a ``refund-approval`` thread approved the refund: now a 409
  naming both.

A join that is held: ``high-value-refund`` needs two owners other than the requester, so after
the first approval the next run is pending until the second, and a join of it waits."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from services.gateway.stream import DEFAULT_KEY_CHECK_SECONDS, DEFAULT_MAX_PER_KEY
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.e2e.test_security_edge import problem
from tests.eventually import eventually
from tests.langgraph_sdk.flows import REFUND, REFUND_INPUT

pytestmark = pytest.mark.e2e

HIGH_VALUE = "high-value-refund"
ATTACKER_WORKSPACE = "ws2-probe"
PAST_THE_CAP = 25
KEYLESS = ("/info", "/ok")
"""LangGraph's meta routes, which need no key (services/gateway/langgraph/meta.py)."""


def langgraph(workspace: str = WORKSPACE) -> str:
    return f"/langgraph/projects/{PROJECT}/workspaces/{workspace}"


def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


@pytest.fixture
async def http(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=cluster.base_url, timeout=90, limits=limits) as client:
        yield client


@dataclass
class Pending:
    """A high-value refund approved once: its next run waits for a second owner."""

    thread_id: str
    run_id: str
    first_approver_email: str

    def join_url(self) -> str:
        return f"{langgraph()}/threads/{self.thread_id}/runs/{self.run_id}/join"


async def pending_run(cluster: Cluster, http: httpx.AsyncClient) -> Pending:
    requester = await cluster.key(PROJECT, email=f"requester-{uuid.uuid4().hex[:8]}@example.com")
    created = await http.post(f"{langgraph()}/threads", json={}, headers=bearer(requester))
    thread_id = created.json()["thread_id"]
    runs = f"{langgraph()}/threads/{thread_id}/runs"
    first = await http.post(
        f"{runs}/wait",
        json={"assistant_id": HIGH_VALUE, "input": REFUND_INPUT},
        headers=bearer(requester),
    )
    assert first.status_code == 200 and first.json()["__interrupt__"], first.text
    email = f"first-{uuid.uuid4().hex[:8]}@example.com"
    approved = await http.post(
        runs,
        json={"assistant_id": HIGH_VALUE, "command": {"resume": "approve"}},
        headers=bearer(await cluster.key(PROJECT, email=email)),
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "pending", approved.text
    return Pending(thread_id, approved.json()["run_id"], email)


async def second_approval(cluster: Cluster, http: httpx.AsyncClient, pending: Pending) -> None:
    second = await cluster.key(PROJECT, email=f"second-{uuid.uuid4().hex[:8]}@example.com")
    done = await http.post(
        f"{langgraph()}/threads/{pending.thread_id}/runs/wait",
        json={"assistant_id": HIGH_VALUE, "command": {"resume": "approve"}},
        headers=bearer(second),
    )
    assert done.status_code == 200, done.text
    assert done.json()["refund_id"].startswith("RF-"), done.text


async def revoke(cluster: Cluster, secret: str) -> None:
    from shared.store.mongo import MongoStore

    store = MongoStore.connect(cluster.env["INTERLOCK_MONGODB_URI"], cluster.database)
    try:
        assert await store.api_keys.revoke(PROJECT, secret.split("_")[1])
    finally:
        await store.close()


# --- finding 2: waits, joins and streams under the streams' limits -------------------------------


async def held_at_cap(
    http: httpx.AsyncClient, pending: Pending, secret: str, cap: int, past: int
) -> list[asyncio.Task[httpx.Response]]:
    """Open ``cap + past`` joins of the pending run at once with ``secret``: exactly ``past`` are
    refused (429 with Retry-After) and the others held; the held ones."""
    joins = [
        asyncio.create_task(http.get(pending.join_url(), headers=bearer(secret)))
        for _ in range(cap + past)
    ]

    async def answered() -> list[asyncio.Task[httpx.Response]]:
        await asyncio.sleep(0.05)
        return [join for join in joins if join.done()]

    refused = await eventually(
        answered, lambda done: len(done) >= past, timeout=60, what="the refusals"
    )
    assert len(refused) == past
    for join in refused:
        answer = join.result()
        problem(answer, 429, "too-many-streams")
        assert int(answer.headers["retry-after"]) >= 1
    return [join for join in joins if not join.done()]


async def test_joins_past_the_keys_cap_are_429(cluster: Cluster, http: httpx.AsyncClient) -> None:
    cap = int(cluster.env.get("INTERLOCK_STREAM_MAX_PER_KEY", DEFAULT_MAX_PER_KEY))
    pending = await pending_run(cluster, http)
    reader = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    held = await held_at_cap(http, pending, reader, cap, PAST_THE_CAP)
    # The cap is the key's, across every held request: with its joins held, a wait and a
    # stream of another key at its cap are refused before they start (no decision recorded).
    same_person = await cluster.key(PROJECT, email=pending.first_approver_email)
    held += await held_at_cap(http, pending, same_person, cap, 1)
    resume = {"assistant_id": HIGH_VALUE, "command": {"resume": "approve"}}
    for path in ("runs/wait", "runs/stream"):
        answer = await http.post(
            f"{langgraph()}/threads/{pending.thread_id}/{path}",
            json=resume,
            headers=bearer(same_person),
        )
        problem(answer, 429, "too-many-streams")
    # The held ones were held until the run stopped, and answer its end.
    assert len(held) == 2 * cap and not any(join.done() for join in held)
    await second_approval(cluster, http, pending)
    async with asyncio.timeout(60):
        answers = await asyncio.gather(*held)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["refund_id"].startswith("RF-"), answer.text


async def test_a_revoked_keys_join_and_stream_end(
    cluster: Cluster, http: httpx.AsyncClient
) -> None:
    """The cluster's gateway re-checks keys every INTERLOCK_STREAM_KEY_CHECK_SECONDS (5 s)."""
    interval = float(
        cluster.env.get("INTERLOCK_STREAM_KEY_CHECK_SECONDS", DEFAULT_KEY_CHECK_SECONDS)
    )
    pending = await pending_run(cluster, http)
    reader = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    join = asyncio.create_task(http.get(pending.join_url(), headers=bearer(reader)))
    # A stream of the first approver's answer given again (another key of theirs: one person
    # counts once, so the run stays pending).
    streamer = await cluster.key(PROJECT, email=pending.first_approver_email)
    events: list[Any] = []
    opened = asyncio.Event()

    async def stream() -> None:
        async with aconnect_sse(
            http,
            "POST",
            f"{langgraph()}/threads/{pending.thread_id}/runs/stream",
            json={
                "assistant_id": HIGH_VALUE,
                "command": {"resume": "approve"},
                "stream_mode": ["values"],
            },
            headers=bearer(streamer),
        ) as source:
            assert source.response.status_code == 200
            async for event in source.aiter_sse():
                events.append((event.event, event.json() if event.data else None))
                opened.set()

    streaming = asyncio.create_task(stream())
    async with asyncio.timeout(30):
        await opened.wait()
    await revoke(cluster, reader)
    await revoke(cluster, streamer)
    # Ended within the interval plus one read of the key (the bound keeps a failure short).
    async with asyncio.timeout(interval + 10):
        joined = await join
        await streaming
    problem(joined, 401, "unauthenticated")
    assert events[0][0] == "metadata"
    assert events[-1] == (
        "error",
        {"error": "Unauthenticated", "message": "the API key is no longer valid"},
    )
    # Another owner approves: the run completes, but the revoked key saw none of it.
    await second_approval(cluster, http, pending)
    assert not any("RF-" in str(data) for _, data in events)
    problem(await http.get(pending.join_url(), headers=bearer(reader)), 401, "unauthenticated")


# --- findings 3 and 4: workspaces -------------------------------------------------------------


@dataclass
class Victim:
    thread_id: str
    owner: str
    attacker: str
    """An owner confined to ATTACKER_WORKSPACE."""


@pytest.fixture
async def victim(cluster: Cluster, http: httpx.AsyncClient) -> Victim:
    owner = await cluster.key(PROJECT, email="victim-owner@example.com")
    thread_id = f"shared-thread-{uuid.uuid4().hex[:8]}"
    created = await http.post(
        f"{langgraph()}/threads",
        json={"thread_id": thread_id, "metadata": {"case": "victim-secret"}},
        headers=bearer(owner),
    )
    assert created.status_code == 200, created.text
    waited = await http.post(
        f"{langgraph()}/threads/{thread_id}/runs/wait",
        json={"assistant_id": REFUND, "input": REFUND_INPUT},
        headers=bearer(owner),
    )
    assert waited.json()["__interrupt__"], waited.text
    attacker = await cluster.key(
        PROJECT, workspaces=[ATTACKER_WORKSPACE], email="attacker@example.com"
    )
    return Victim(thread_id, owner, attacker)


async def still_waiting(http: httpx.AsyncClient, victim: Victim) -> None:
    got = await http.get(f"{langgraph()}/threads/{victim.thread_id}", headers=bearer(victim.owner))
    assert got.status_code == 200, got.text
    assert got.json()["status"] == "interrupted", got.text
    assert got.json()["metadata"]["case"] == "victim-secret"


async def test_the_confined_key_sees_no_other_workspaces_thread_by_search(
    http: httpx.AsyncClient, victim: Victim
) -> None:
    invoked = await http.post(
        f"/api/v1/projects/{PROJECT}/workspaces/{ATTACKER_WORKSPACE}/invoke",
        json={"agent": REFUND, "message": "Refund claim CLM-4821"},
        headers={
            **bearer(victim.attacker),
            "Idempotency-Key": f"langgraph-thread:{victim.thread_id}",
        },
    )
    assert invoked.status_code == 202, invoked.text
    search = f"{langgraph(ATTACKER_WORKSPACE)}/threads/search"

    async def searched(body: dict[str, Any]) -> list[dict[str, Any]]:
        found = await http.post(search, json=body, headers=bearer(victim.attacker))
        assert found.status_code == 200, found.text
        assert "victim-secret" not in found.text, found.text
        listed: list[dict[str, Any]] = found.json()
        return listed

    # Once its execution waits (as the victim's does), the attacker's search by every status.
    await eventually(
        lambda: http.get(
            f"/api/v1/projects/{PROJECT}/executions/{invoked.json()['execution_id']}",
            params={"workspace_id": ATTACKER_WORKSPACE},
            headers=bearer(victim.attacker),
        ),
        lambda r: r.json().get("status") == "suspended",
        what="the attacker's execution to wait",
    )
    for body in (
        {"status": "interrupted", "limit": 100},
        {"status": "error", "limit": 100},
        {"status": "busy", "limit": 100},
        {"status": "idle", "limit": 100},
        {"limit": 100},
        {"ids": [victim.thread_id]},
    ):
        assert victim.thread_id not in [t["thread_id"] for t in await searched(body)], body
    await still_waiting(http, victim)


async def test_the_confined_key_can_neither_probe_nor_squat_nor_run_a_thread_id(
    http: httpx.AsyncClient, victim: Victim
) -> None:
    attacker = bearer(victim.attacker)
    free = f"free-thread-{uuid.uuid4().hex[:8]}"
    here = langgraph(ATTACKER_WORKSPACE)
    resume = {"assistant_id": REFUND, "command": {"resume": "approve"}}

    async def both(method: str, path: str, body: Any = None) -> tuple[httpx.Response, ...]:
        """The victim's id and a free one, asked the same of the attacker's workspace."""
        return tuple(
            [
                await http.request(
                    method, here + path.format(thread_id), json=body, headers=attacker
                )
                for thread_id in (victim.thread_id, free)
            ]
        )

    # Read and run: the victim's id answers exactly as a free one, 404.
    for method, path, body in (
        ("GET", "/threads/{}", None),
        ("GET", "/threads/{}/state", None),
        ("POST", "/threads/{}/runs", resume),
        ("POST", "/threads/{}/runs/wait", resume),
        ("POST", "/threads/{}/runs/stream", resume),
        ("POST", "/threads/{}/runs/wait", {"assistant_id": REFUND, "input": REFUND_INPUT}),
    ):
        used, unused = await both(method, path, body)
        problem(used, 404, "thread-not-found")
        assert used.json()["detail"].replace(victim.thread_id, "ID") == unused.json()[
            "detail"
        ].replace(free, "ID")
    await still_waiting(http, victim)
    # Create: no 409 oracle; the attacker's workspace gets a thread of its own under the id.
    created = await http.post(
        f"{here}/threads", json={"thread_id": victim.thread_id}, headers=attacker
    )
    fresh = await http.post(f"{here}/threads", json={"thread_id": free}, headers=attacker)
    assert created.status_code == fresh.status_code == 200, (created.text, fresh.text)
    assert created.json()["metadata"] == {} and created.json()["status"] == "idle"
    kept = await http.post(
        f"{here}/threads",
        json={"thread_id": victim.thread_id, "if_exists": "do_nothing"},
        headers=attacker,
    )
    assert kept.json()["metadata"] == {} and "victim-secret" not in kept.text
    # Its run is its own: the victim's interrupt is not its to answer.
    ran = await http.post(
        f"{here}/threads/{victim.thread_id}/runs/wait",
        json={"assistant_id": REFUND, "input": REFUND_INPUT},
        headers=attacker,
    )
    assert ran.status_code == 200 and ran.json()["__interrupt__"], ran.text
    approved = await http.post(
        f"{here}/threads/{victim.thread_id}/runs/wait", json=resume, headers=attacker
    )
    assert approved.json()["outcome"] == "refunded", approved.text
    await still_waiting(http, victim)
    # No squatting: an id the attacker took first is still free in the victim's workspace.
    first = f"taken-first-{uuid.uuid4().hex[:8]}"
    taken = await http.post(f"{here}/threads", json={"thread_id": first}, headers=attacker)
    assert taken.status_code == 200, taken.text
    second = f"{first}-2"
    await http.post(f"{here}/threads", json={"thread_id": second}, headers=attacker)
    for thread_id, if_exists in ((first, "raise"), (second, "do_nothing")):
        mine = await http.post(
            f"{langgraph()}/threads",
            json={"thread_id": thread_id, "if_exists": if_exists, "metadata": {"v": 1}},
            headers=bearer(victim.owner),
        )
        assert mine.status_code == 200, mine.text
        assert mine.json()["metadata"] == {"v": 1}
    started = await http.post(
        f"{langgraph()}/threads/{first}/runs",
        json={"assistant_id": REFUND, "input": REFUND_INPUT},
        headers=bearer(victim.owner),
    )
    assert started.status_code == 200, started.text


async def test_every_langgraph_route_refuses_a_key_confined_to_another_workspace(
    cluster: Cluster, http: httpx.AsyncClient, victim: Victim
) -> None:
    """Contract: every LangGraph route the gateway lists in its OpenAPI document answers the
    confined key 404 in the victim's workspace, and the victim's thread is untouched."""
    state = await http.get(
        f"{langgraph()}/threads/{victim.thread_id}/state", headers=bearer(victim.owner)
    )
    run_id = state.json()["tasks"][0]["id"]
    cron = {"assistant_id": REFUND, "schedule": "0 9 1 1 *", "input": REFUND_INPUT}
    made = await http.post(
        f"{langgraph()}/runs/crons",
        json={**cron, "metadata": {"case": "victim-secret"}},
        headers=bearer(victim.owner),
    )
    assert made.status_code == 200, made.text
    cron_id = made.json()["cron_id"]
    paths = (await http.get("/openapi.json")).json()["paths"]
    prefix = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
    bodies = {
        "/threads": {"thread_id": victim.thread_id, "if_exists": "do_nothing"},
        "/threads/search": {"ids": [victim.thread_id]},
        "/assistants/search": {},
        "/assistants/count": {},
        "/threads/{thread_id}": {"metadata": {"hijacked": True}},
        "/threads/{thread_id}/state": {"values": {"messages": [{"role": "ai", "content": "x"}]}},
        "/threads/{thread_id}/history": {},
        "/threads/{thread_id}/copy": {},
        "/store/items": {"namespace": ["facts"], "key": "k", "value": {"hijacked": True}},
        "/store/items/search": {"namespace_prefix": []},
        "/store/namespaces": {},
        "/runs/crons": cron,
        "/threads/{thread_id}/runs/crons": cron,
        "/runs/crons/search": {},
        "/runs/crons/count": {},
        "/runs/crons/{cron_id}": {"enabled": False},
    }
    resume = {"assistant_id": REFUND, "command": {"resume": "approve"}}
    start = {"assistant_id": REFUND, "input": REFUND_INPUT}
    tried = []
    for path, operations in paths.items():
        if not path.startswith("/langgraph/"):
            continue
        route = path.removeprefix(prefix)
        url = langgraph() + route.format(
            thread_id=victim.thread_id,
            run=run_id,
            assistant_id=REFUND,
            namespace="review",
            cron_id=cron_id,
        )
        if route in KEYLESS:
            # Answered to anyone, the same for every workspace: nothing of one to learn.
            answer = await http.get(url, headers=bearer(victim.attacker))
            assert answer.status_code == 200, answer.text
            elsewhere = await http.get(f"/langgraph/projects/nowhere/workspaces/none{route}")
            assert answer.json() == elsewhere.json(), route
            continue
        for method in operations:
            body = bodies.get(route)
            if method == "post" and body is None:
                body = start if route.startswith("/runs") else resume
            query = "?namespace=facts&key=k" if route == "/store/items" else ""
            answer = await http.request(
                method.upper(), url + query, json=body, headers=bearer(victim.attacker)
            )
            problem(answer, 404, "not-found")
            assert "victim-secret" not in answer.text
            tried.append((method, route))
    # With runs.join_stream (issue 34), the store and the crons (issue 36).
    assert len(tried) == 39, tried
    await still_waiting(http, victim)
    kept = await http.get(f"{langgraph()}/runs/crons/{cron_id}", headers=bearer(victim.owner))
    assert kept.json()["enabled"] and kept.json()["metadata"] == {"case": "victim-secret"}


# --- finding 7: the assistant a run names -------------------------------------------------------


async def test_a_resume_naming_another_assistant_is_409_naming_both(
    cluster: Cluster, http: httpx.AsyncClient, victim: Victim
) -> None:
    approver = bearer(await cluster.key(PROJECT, email="approver@example.com"))
    runs = f"{langgraph()}/threads/{victim.thread_id}/runs"
    for path in ("", "/wait", "/stream"):
        for body in (
            {"assistant_id": "sql-ops", "command": {"resume": "approve"}},
            {"assistant_id": "sql-ops", "input": REFUND_INPUT},
        ):
            answer = await http.post(runs + path, json=body, headers=approver)
            refused = problem(answer, 409, "assistant-mismatch")
            assert REFUND in refused["detail"] and "sql-ops" in refused["detail"], refused
    await still_waiting(http, victim)
    done = await http.post(
        f"{runs}/wait",
        json={"assistant_id": REFUND, "command": {"resume": "approve"}},
        headers=approver,
    )
    assert done.json()["outcome"] == "refunded", done.text
