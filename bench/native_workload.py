"""Section 12's concurrent run through the native API, so that what the LangGraph routes cost is
held against what the same executions cost without them, on the same services in the same
minutes (issue 35: langgraph-sdk's CPU per execution within 1.2x of the native API's).

The same agent, message and decision as ``bench/peers/sdk_workload.py``, the same closed loop
with the same number in flight; each execution is an invoke, its ``suspended`` status, an
approval and its ``completed`` status, the statuses read on ``execution.status`` as the native
figures' harness reads them (``bench/watchers.py``). Its timings are ``sdk_workload.Timing``s,
so ``sdk_workload.throughput`` sums them up alike."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from bench.peers.sdk_workload import MESSAGE, Timing, Unexpected, closed_loop
from bench.watchers import TERMINAL

PER_HALF_SECONDS = 120.0
"""How long a half may take before the execution is recorded as failed (never a hang)."""


class NativeClient(Protocol):
    """What of ``bench.client.BenchClient`` an execution uses."""

    async def invoke(self, message: str) -> str: ...

    async def approve(self, execution_id: str) -> None: ...


class StatusWaits:
    """The statuses seen per execution, and who waits for one. Fed by a watcher's callback; a
    status seen before anyone waits for it is kept, so no status is missed by arriving early."""

    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}
        self._waiting: dict[str, tuple[frozenset[str], asyncio.Future[str]]] = {}

    def saw(self, execution_id: str, status: str, at: float) -> None:
        self._seen.setdefault(execution_id, set()).add(status)
        waiting = self._waiting.get(execution_id)
        if waiting is not None and status in waiting[0] and not waiting[1].done():
            waiting[1].set_result(status)

    async def until(self, execution_id: str, wanted: frozenset[str]) -> str:
        """The first of ``wanted`` the execution reaches (at once if it was seen already)."""
        reached = self._seen.get(execution_id, set()) & wanted
        if reached:
            return min(reached)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[execution_id] = (wanted, future)
        try:
            return await future
        finally:
            del self._waiting[execution_id]

    def forget(self, execution_id: str) -> None:
        self._seen.pop(execution_id, None)


SUSPENDED_OR_ENDED = frozenset({"suspended"}) | TERMINAL


async def one(client: NativeClient, waits: StatusWaits) -> Timing:
    """One execution; its failure is recorded in the timing, not raised."""
    record = Timing(started=time.perf_counter())
    execution_id = ""
    try:
        execution_id = await client.invoke(MESSAGE)
        async with asyncio.timeout(PER_HALF_SECONDS):
            first = await waits.until(execution_id, SUSPENDED_OR_ENDED)
        if first != "suspended":
            raise Unexpected(f"the execution did not suspend: {first}")
        record.interrupted = record.resumed = time.perf_counter()
        await client.approve(execution_id)
        async with asyncio.timeout(PER_HALF_SECONDS):
            second = await waits.until(execution_id, TERMINAL)
        record.completed = time.perf_counter()
        if second != "completed":
            raise Unexpected(f"the approved execution did not complete: {second}")
    except Exception as exc:  # reported with the figures: a failed execution is not timed
        record.completed = None
        record.error = repr(exc)[:300]
    finally:
        waits.forget(execution_id)
    return record


async def concurrent(
    client: NativeClient, waits: StatusWaits, count: int, in_flight: int
) -> list[Timing]:
    """``count`` executions, ``in_flight`` at once, as ``sdk_workload.concurrent`` runs them."""
    return await closed_loop(lambda: one(client, waits), count, in_flight)
