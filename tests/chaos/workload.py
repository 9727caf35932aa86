"""The load a scenario runs: reviewers' clients that invoke the outreach agent and decide every
suspension, retrying as a polite client does (same idempotency key, after ``Retry-After``), and
recording every answer they get for the invariant checker."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict
from collections.abc import Coroutine
from typing import Any

import httpx

from tests.chaos.invariants import ConversationRecord, HttpRecord

TERMINAL = {"completed", "error", "cancelled", "expired"}
POLL_SECONDS = 0.3
MAX_POLL_SECONDS = 3.0
"""Without a watcher, a reviewer's client polls its execution every 0.3 s after a change,
backing off to 3 s while nothing changes."""
WATCHED_POLL_SECONDS = 60.0
"""With a watcher (``nudge``), a client reads its execution when the orchestrator announces a
status change on ``execution.status``, as a reviewer reads a review when notified, and every
minute in case an announcement was missed. Polling instead made the soak's load its own: hundreds of
executions queued behind a fault polled the gateway over a hundred times a second, each a few
store reads, which kept the store saturated and the queue growing."""
MAX_IN_FLIGHT = 100
"""Requests this load has on the wire at once (its client's connections: ``client_limits``).
The rest wait for a slot here, in an asyncio semaphore, not in httpx's pool queue: httpcore
re-matches every queued request against every connection each time a request starts or ends,
so with hundreds queued behind a fault the harness's own event loop spent its time there (a
replayed soak: 671 queued, 25 s without a request sent), its clients timed out waiting for
their own pool, and the gateway, answering a probe in 30 ms, was recorded as hanging. The
timeout now starts when a request is sent: what it measures is the gateway."""
MAX_RETRY_PAUSE = 2.0
"""Cap on a ``Retry-After`` pause, so a scenario does not idle through a short outage."""


def client_limits() -> httpx.Limits:
    """The load's client keeps a connection per request slot, so none is reopened per request."""
    return httpx.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=MAX_IN_FLIGHT)


class Workload:
    def __init__(
        self, client: httpx.AsyncClient, *, project: str, workspace: str, reject_every: int = 5
    ) -> None:
        self.client = client
        self.project = project
        self.workspace = workspace
        self.reject_every = reject_every
        self.http: list[HttpRecord] = []
        self.created: set[str] = set()
        self.conversations: list[ConversationRecord] = []
        """The conversations its clients hold (tests/chaos/conversations.py), for the checker."""
        self.finished: dict[str, str] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._count = 0
        self.last_progress = time.monotonic()
        """When a client last saw an execution move (created, a new status or suspension)."""
        self.watched = False
        self.nudges = 0
        """Status announcements the watcher passed on (in the scenario's notes)."""
        self._changed: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)

    def nudge(self, execution_id: str, status: str, seen: float) -> None:
        """A watcher saw ``execution_id`` change status (bench/watchers.py ``OnStatus``)."""
        self.nudges += 1
        self._changed[execution_id].set()

    async def next_look(self, execution_id: str, pause: float) -> None:
        if not self.watched:
            await asyncio.sleep(pause)
            return
        changed = self._changed[execution_id]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=WATCHED_POLL_SECONDS)
        changed.clear()

    def progressed(self) -> None:
        self.last_progress = time.monotonic()

    # --- one HTTP call, recorded ---------------------------------------------------------------

    async def call(
        self,
        method: str,
        path: str,
        *,
        execution_id: str | None = None,
        client_error: bool = False,
        **kwargs: Any,
    ) -> httpx.Response | None:
        try:
            async with self._slots:
                response = await self.client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            self.http.append(
                HttpRecord(method, path, None, execution_id=execution_id, timed_out=True)
            )
            return None
        except httpx.TransportError:  # refused or reset: the gateway process was down
            self.http.append(HttpRecord(method, path, None, execution_id=execution_id))
            return None
        body: dict[str, Any] = {}
        if response.headers.get("content-type", "").startswith("application/json"):
            with contextlib.suppress(ValueError):
                parsed = response.json()
                # A list answers a listing (a thread's history): no execution of its own.
                body = parsed if isinstance(parsed, dict) else {}
        accepted_resume = method == "POST" and path.endswith("/resume") and response.is_success
        self.http.append(
            HttpRecord(
                method,
                path,
                response.status_code,
                content_type=response.headers.get("content-type", ""),
                retry_after=response.headers.get("retry-after"),
                execution_id=execution_id or body.get("execution_id"),
                generation=body.get("generation") if accepted_resume else None,
                decision=body.get("decision") if accepted_resume else None,
                client_error=client_error,
            )
        )
        return response

    @property
    def scope(self) -> str:
        return f"/api/v1/projects/{self.project}"

    # --- the reviewer's loop -------------------------------------------------------------------

    async def invoke(self, stages: int, *, deadline: float) -> str | None:
        key = f"chaos-{uuid.uuid4().hex}"
        while time.monotonic() < deadline:
            response = await self.call(
                "POST",
                f"{self.scope}/workspaces/{self.workspace}/invoke",
                json={"agent": "outreach", "message": f"{stages} stages", "idempotency_key": key},
            )
            if response is not None and response.status_code == 202:
                execution_id = str(response.json()["execution_id"])
                self.created.add(execution_id)
                self.progressed()
                return execution_id
            await wait_retry_after(response)
        return None

    async def status(self, execution_id: str) -> dict[str, Any] | None:
        response = await self.call(
            "GET",
            f"{self.scope}/executions/{execution_id}",
            execution_id=execution_id,
            params={"workspace_id": self.workspace},
        )
        if response is None or response.status_code != 200:
            await wait_retry_after(response)
            return None
        return dict(response.json())

    async def decide(self, execution_id: str, generation: int, decision: str) -> int | None:
        response = await self.call(
            "POST",
            f"{self.scope}/executions/{execution_id}/resume",
            execution_id=execution_id,
            params={"workspace_id": self.workspace},
            json={"decision": decision, "generation": generation, "reviewer_notes": "chaos"},
        )
        if response is None:
            return None
        return response.status_code

    async def run_one(self, index: int, stages: int, deadline: float) -> None:
        execution_id = await self.invoke(stages, deadline=deadline)
        if execution_id is None:
            return
        decided = 0
        seen: tuple[str, int] | None = None
        pause = POLL_SECONDS
        while time.monotonic() < deadline:
            body = await self.status(execution_id)
            if body is None:
                continue
            if (body["status"], body.get("suspension_id") or 0) != seen:
                seen = (body["status"], body.get("suspension_id") or 0)
                self.progressed()
                pause = POLL_SECONDS
            if body["status"] in TERMINAL:
                self.finished[execution_id] = body["status"]
                return
            generation = body.get("suspension_id") or 0
            if body["status"] == "suspended" and generation > decided:
                answer = (
                    "reject" if index % self.reject_every == self.reject_every - 1 else "approve"
                )
                status = await self.decide(execution_id, generation, answer)
                # 409: decided already (an earlier attempt of ours whose answer we did not get,
                # or another reviewer); the suspension moved on either way.
                if status in (202, 409):
                    decided = generation
                    continue
            await self.next_look(execution_id, pause)
            pause = min(pause * 1.5, MAX_POLL_SECONDS)

    # --- load ----------------------------------------------------------------------------------

    def start(
        self,
        count: int,
        *,
        stages: tuple[int, ...] = (1, 2),
        spacing: float = 0.2,
        deadline_seconds: float = 300,
    ) -> None:
        """Start ``count`` executions, one every ``spacing`` seconds, each driven to its end."""

        async def launch() -> None:
            deadline = time.monotonic() + deadline_seconds
            for _ in range(count):
                index = self._count
                self._count += 1
                stage_count = stages[index % len(stages)]
                self._tasks.append(asyncio.create_task(self.run_one(index, stage_count, deadline)))
                await asyncio.sleep(spacing)

        self._tasks.append(asyncio.create_task(launch()))

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run a client of the scenario's own (a conversation) as part of the load: ``settle``
        waits for it too."""
        self._tasks.append(asyncio.create_task(coroutine))

    async def settle(self, timeout: float, *, idle: float | None = None) -> None:
        """Wait for every started execution to be driven to its end, or give up (the checker
        then finds what is stuck) at the deadline or, with ``idle``, once no execution moved
        for that long: a backlog still draining is not stuck, one that stopped moving is."""
        end = time.monotonic() + timeout
        while True:
            pending = [t for t in self._tasks if not t.done()]
            if not pending:
                break
            remaining = end - time.monotonic()
            if idle is not None:
                remaining = min(remaining, self.last_progress + idle - time.monotonic())
            if remaining <= 0:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
            await asyncio.wait(pending, timeout=min(remaining, 5.0))
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]


async def wait_retry_after(response: httpx.Response | None) -> None:
    retry_after = response.headers.get("retry-after") if response is not None else None
    try:
        seconds = float(retry_after) if retry_after else 0.5
    except ValueError:
        seconds = 0.5
    await asyncio.sleep(min(seconds, MAX_RETRY_PAUSE))
