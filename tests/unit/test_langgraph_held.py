"""Issue 31, finding 2: the LangGraph API's ``runs.wait``, ``runs.join`` and ``runs.stream`` are
held as Interlock's execution streams are, by the same bounds of the process
(services/gateway/stream.py, ``StreamBounds``): one cap per key across all of them, the key's
re-check (a revoked key's wait or join answers 401, its stream ends with an ``error`` event),
and the streams' lifetime. Over the in-process services.

A run that is held: ``high-value-refund`` needs two approvals, so after the first its next run
is pending until the second, and a join of it waits; so does a wait or a stream of the first
approver's answer given again (by another key of the same person: one identity counts once)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pymongo.errors import ServerSelectionTimeoutError

from shared.domain.threads import execution_id_for, turn_key
from shared.store.api_keys import Role, create_key
from tests.eventually import eventually
from tests.unit.inprocess import World
from tests.unit.test_execution_stream import STREAM, gateway

LANGGRAPH = "/langgraph/projects/p1/workspaces/w1"
AGENT = "high-value-refund"
INPUT = {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}


@dataclass
class Held:
    """A thread whose next run waits for a second approval, and the keys around it."""

    http: httpx.AsyncClient
    thread_id: str
    first_run: str
    """The run that stopped at the interrupt: a join of it answers at once."""
    pending_run: str
    """The run the first approval started: a join of it waits."""
    execution_id: str
    reader: str
    """A read-only key's secret."""
    second: str
    """An owner other than the requester and the first approver."""

    def as_key(self, secret: str) -> dict[str, str]:
        return {"authorization": f"Bearer {secret}"}

    async def join(self, secret: str, run: str | None = None) -> httpx.Response:
        url = f"{LANGGRAPH}/threads/{self.thread_id}/runs/{run or self.pending_run}/join"
        return await self.http.get(url, headers=self.as_key(secret))


async def key(world: World, role: Role = Role.OWNER, email: str | None = None) -> str:
    _, secret = await create_key(
        world.store.api_keys, project_id="p1", role=role, name="t", email=email
    )
    return secret


@asynccontextmanager
async def held(
    world: World, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> AsyncIterator[Held]:
    requester = await key(world, email="requester@example.com")
    async with gateway(world, monkeypatch, requester, **settings) as http:
        thread_id = (await http.post(f"{LANGGRAPH}/threads", json={})).json()["thread_id"]
        runs = f"{LANGGRAPH}/threads/{thread_id}/runs"
        first = await http.post(runs, json={"assistant_id": AGENT, "input": INPUT})
        assert first.status_code == 200, first.text
        waited = await http.get(f"{runs}/{first.json()['run_id']}/join")
        assert waited.json()["__interrupt__"], waited.text
        approver = await key(world, email="first@example.com")
        approved = await http.post(
            runs,
            json={"assistant_id": AGENT, "command": {"resume": "approve"}},
            headers={"authorization": f"Bearer {approver}"},
        )
        assert approved.status_code == 200, approved.text
        assert approved.json()["status"] == "pending"
        yield Held(
            http,
            thread_id,
            first.json()["run_id"],
            approved.json()["run_id"],
            execution_id_for("p1", "w1", turn_key(thread_id, 1)),
            await key(world, Role.READ_ONLY),
            await key(world, email="second@example.com"),
        )


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["type"].endswith(f"/{slug}"), body
    return body


def sse(body: str) -> list[tuple[str, Any]]:
    """``(event, data)`` of each event with data in a server-sent events body."""
    events = []
    for block in body.split("\n\n"):
        lines = block.splitlines()
        kind = next((line[7:] for line in lines if line.startswith("event: ")), "message")
        data = [line[6:] for line in lines if line.startswith("data: ")]
        if data:
            events.append((kind, json.loads("\n".join(data))))
    return events


async def held_at_cap(run: Held, secret: str, cap: int, past: int) -> list[asyncio.Task[Any]]:
    """Open ``cap + past`` joins of the pending run at once with ``secret``: ``past`` of them are
    refused (429) and ``cap`` held; the held ones, once the refused have answered."""
    joins = [asyncio.create_task(run.join(secret)) for _ in range(cap + past)]

    async def answered() -> list[asyncio.Task[Any]]:
        await asyncio.sleep(0)
        return [join for join in joins if join.done()]

    refused = await eventually(answered, lambda done: len(done) >= past, what="the refusals")
    for join in refused:
        answer = join.result()
        problem(answer, 429, "too-many-streams")
        assert int(answer.headers["retry-after"]) >= 1
    held = [join for join in joins if not join.done()]
    assert len(held) == cap
    return held


async def test_joins_waits_and_streams_past_the_keys_cap_are_429_and_share_it_with_streams(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with held(world, monkeypatch, stream_max_per_key=2) as run:
        joins = await held_at_cap(run, run.reader, cap=2, past=3)
        # A join of a run that stopped would answer at once: refused while the two are held.
        problem(await run.join(run.reader, run.first_run), 429, "too-many-streams")
        # The same cap: a wait, a stream and an execution stream of a key at its cap are
        # refused too, before anything starts.
        owner_at_cap = await key(world, email="capped@example.com")
        capped = await held_at_cap(run, owner_at_cap, cap=2, past=1)
        before = await world.execution(run.execution_id)
        resume = {"assistant_id": AGENT, "command": {"resume": "approve"}}
        for path in ("runs/wait", "runs/stream"):
            answer = await run.http.post(
                f"{LANGGRAPH}/threads/{run.thread_id}/{path}",
                json=resume,
                headers=run.as_key(owner_at_cap),
            )
            problem(answer, 429, "too-many-streams")
        streamed = await run.http.get(
            STREAM.format(run.execution_id),
            params={"workspace_id": "w1"},
            headers=run.as_key(owner_at_cap),
        )
        problem(streamed, 429, "too-many-streams")
        # Nothing was decided by the refused wait and stream: still the one approval.
        assert before.suspension is not None
        approvals = await world.store.approvals.list(
            run.execution_id, before.suspension.suspension_id
        )
        assert [a.identity for a in approvals] == ["person:first@example.com"]
        assert (await world.execution(run.execution_id)) == before
        # Another key has slots of its own; a cancel that does not wait takes none.
        other = await run.join(await key(world), run.first_run)
        assert other.status_code == 200, other.text
        cancelled = await run.http.post(
            f"{LANGGRAPH}/threads/{run.thread_id}/runs/{run.pending_run}/cancel",
            headers=run.as_key(owner_at_cap),
        )
        assert cancelled.status_code == 202, cancelled.text
        # The cancel ends the run: every held join answers, and the slots come back.
        for answer in await asyncio.gather(*joins, *capped):
            assert answer.status_code == 200, answer.text
        assert (await run.join(run.reader, run.first_run)).status_code == 200


async def test_a_revoked_keys_join_and_wait_answer_401_and_its_stream_ends_with_an_error(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with held(world, monkeypatch, stream_key_check_seconds=0.05) as run:
        join = asyncio.create_task(run.join(run.reader))
        # The first approver's answer again, by keys of their own: held, as one identity's
        # second approval does not count.
        waiter = await key(world, email="first@example.com")
        resume = {"assistant_id": AGENT, "command": {"resume": "approve"}}
        wait = asyncio.create_task(
            run.http.post(
                f"{LANGGRAPH}/threads/{run.thread_id}/runs/wait",
                json=resume,
                headers=run.as_key(waiter),
            )
        )
        streamer = await key(world, email="first@example.com")
        stream = asyncio.create_task(
            run.http.post(
                f"{LANGGRAPH}/threads/{run.thread_id}/runs/stream",
                json={**resume, "stream_mode": ["values", "updates"]},
                headers=run.as_key(streamer),
            )
        )
        # Held past several re-checks of valid keys (a bound on what should not happen: no
        # condition to wait for).
        await asyncio.sleep(0.2)
        assert not (join.done() or wait.done() or stream.done())
        for secret in (run.reader, waiter, streamer):
            assert await world.store.api_keys.revoke("p1", secret.split("_")[1])
        async with asyncio.timeout(5):
            joined, waited, streamed = await asyncio.gather(join, wait, stream)
        problem(joined, 401, "unauthenticated")
        problem(waited, 401, "unauthenticated")
        assert joined.headers["www-authenticate"].startswith("Bearer")
        assert streamed.status_code == 200
        events = sse(streamed.text)
        assert events[0][0] == "metadata"
        assert events[-1] == (
            "error",
            {"error": "Unauthenticated", "message": "the API key is no longer valid"},
        )
        assert not any(kind == "values" and "refund_id" in str(data) for kind, data in events)
        # The run goes on for those who still may see it: the second approval completes it.
        done = await run.http.post(
            f"{LANGGRAPH}/threads/{run.thread_id}/runs/wait",
            json=resume,
            headers=run.as_key(run.second),
        )
        assert done.status_code == 200, done.text
        assert done.json()["refund_id"].startswith("RF-"), done.text
        problem(await run.join(run.reader), 401, "unauthenticated")


async def test_a_join_and_a_stream_live_at_most_the_streams_lifetime(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with held(world, monkeypatch, stream_max_seconds=0.2) as run:
        async with asyncio.timeout(5):
            joined = await run.join(run.reader)
        assert joined.status_code == 200, joined.text
        assert "__interrupt__" in joined.json()  # the state as it is: still waiting
        resume = {"assistant_id": AGENT, "command": {"resume": "approve"}}
        async with asyncio.timeout(5):
            streamed = await run.http.post(
                f"{LANGGRAPH}/threads/{run.thread_id}/runs/stream",
                json=resume,
                headers=run.as_key(await key(world, email="first@example.com")),
            )
        assert streamed.status_code == 200
        assert "join the run" in streamed.text
        assert [kind for kind, _ in sse(streamed.text)] == ["metadata", "values"]


async def test_a_key_that_cannot_be_read_again_ends_a_join_with_503_and_a_stream_with_error(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with held(world, monkeypatch, stream_key_check_seconds=0.05) as run:
        join = asyncio.create_task(run.join(run.reader))
        streamer = await key(world, email="first@example.com")
        stream = asyncio.create_task(
            run.http.post(
                f"{LANGGRAPH}/threads/{run.thread_id}/runs/stream",
                json={"assistant_id": AGENT, "command": {"resume": "approve"}},
                headers=run.as_key(streamer),
            )
        )
        await asyncio.sleep(0.2)  # both held past several re-checks (nothing to wait for)
        assert not (join.done() or stream.done())

        async def unreachable(key_id: str) -> None:
            raise ServerSelectionTimeoutError("the database is away")

        monkeypatch.setattr(world.store.api_keys, "get", unreachable)
        async with asyncio.timeout(5):
            joined, streamed = await asyncio.gather(join, stream)
        problem(joined, 503, "service-unavailable")
        assert int(joined.headers["retry-after"]) >= 1
        assert sse(streamed.text)[-1] == (
            "error",
            {
                "error": "KeyCheckFailed",
                "message": "the API key could not be checked again: reconnect",
            },
        )
