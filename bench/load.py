"""Open-loop load: executions start at fixed times whatever the system does, and every latency
is measured from when its request was *due*, so a slow system cannot hide its queueing by
slowing the load down (no coordinated omission).

Each execution is invoked at its scheduled time, approved through the HTTP API as soon as the
watcher sees it suspended, and followed to its end.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from bench.client import BenchClient
from bench.procstats import CpuMeter
from bench.watchers import TERMINAL, Watcher


@dataclass
class Execution:
    scheduled_at: float
    """Wall-clock time the invoke was due (the origin of every latency)."""
    execution_id: str | None = None
    invoked_at: float | None = None
    suspended_at: float | None = None
    decided_at: float | None = None
    """When the harness saw the suspension and decided (the decision's due time)."""
    completed_at: float | None = None
    status: str | None = None
    resumed_at: float | None = None
    """Stamped by the agent: its first step after the decision ran."""
    replay_seconds: float | None = None
    error: str | None = None


@dataclass
class Run:
    offered_rate: float
    executions: list[Execution]
    started_at: float
    ended_at: float
    cpu: dict[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    commands: list[tuple[str, str, str, int]] | None = None
    """Store commands the services made during the run, (process, collection, command, count);
    None where they are not counted (the embedded mode)."""

    def completed(self) -> list[Execution]:
        return [e for e in self.executions if e.status == "completed"]

    def failures(self) -> list[str]:
        return [f"{e.execution_id}: {e.status} {e.error or ''}".strip() for e in self.failed()]

    def failed(self) -> list[Execution]:
        return [e for e in self.executions if e.status != "completed"]

    def raw(self) -> dict[str, Any]:
        return {
            "offered_rate": self.offered_rate,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "timed_out": self.timed_out,
            "cpu": self.cpu,
            "store_commands": self.commands,
            "executions": [asdict(e) for e in self.executions],
        }


class _Tracker:
    def __init__(self, client: BenchClient, watcher: Watcher, total: int, approve: bool) -> None:
        self.client = client
        self.approve = approve
        self.watcher = watcher
        self.total = total
        self.by_id: dict[str, Execution] = {}
        self.early: dict[str, list[tuple[str, float]]] = {}
        self.finished = 0
        self.done = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def on_status(self, execution_id: str, status: str, seen: float) -> None:
        record = self.by_id.get(execution_id)
        if record is None:  # seen before its invoke answered
            self.early.setdefault(execution_id, []).append((status, seen))
            return
        self._apply(record, status, seen)

    def _apply(self, record: Execution, status: str, seen: float) -> None:
        if status == "suspended" and record.suspended_at is None:
            record.suspended_at = seen
            if not self.approve:  # held suspended (the idle-cost figure)
                self._finish(record, "suspended")
                return
            record.decided_at = time.time()
            self.spawn(self._approve(record))
        elif status in TERMINAL and record.status is None:
            record.completed_at = seen
            self._finish(record, status)

    def _finish(self, record: Execution, status: str, error: str | None = None) -> None:
        record.status = status
        record.error = error
        self.finished += 1
        if self.finished >= self.total:
            self.done.set()

    async def invoke(self, record: Execution, message: str) -> None:
        try:
            execution_id = await self.client.invoke(message)
        except httpx.HTTPError as exc:
            self._finish(record, "invoke-failed", repr(exc))
            return
        record.invoked_at = time.time()
        record.execution_id = execution_id
        self.by_id[execution_id] = record
        for status, seen in self.early.pop(execution_id, []):
            self._apply(record, status, seen)

    async def _approve(self, record: Execution) -> None:
        assert record.execution_id is not None
        self.watcher.approved(record.execution_id)
        try:
            await self.client.approve(record.execution_id)
        except httpx.HTTPError as exc:
            if record.status is None:
                self._finish(record, "resume-failed", repr(exc))


async def open_loop(
    client: BenchClient,
    watcher: Watcher,
    *,
    rate: float,
    count: int,
    message: str,
    timeout: float,
    pids: dict[str, int],
    approve: bool = True,
) -> Run:
    """Start ``count`` executions at ``rate`` per second and follow each to its end (or, with
    ``approve=False``, to its suspension, where it is left)."""
    tracker = _Tracker(client, watcher, count, approve)
    await watcher.start(tracker.on_status)
    loop = asyncio.get_running_loop()
    to_wall = time.time() - loop.time()
    first = loop.time() + 0.05
    executions = [Execution(scheduled_at=first + i / rate + to_wall) for i in range(count)]
    meter = CpuMeter.start(pids)
    started = time.time()
    try:
        for i, record in enumerate(executions):
            delay = first + i / rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tracker.spawn(tracker.invoke(record, message))
        remaining = timeout - (time.time() - started)
        timed_out = False
        try:
            await asyncio.wait_for(tracker.done.wait(), max(remaining, 1.0))
        except TimeoutError:
            timed_out = True
        ended = time.time()
        cpu = meter.stop()
    finally:
        await watcher.stop()
        for task in list(tracker.tasks):
            task.cancel()
    return Run(rate, executions, started, ended, cpu, timed_out)


async def fetch_stamps(client: BenchClient, run: Run, concurrency: int = 8) -> None:
    """After the measured interval: read what the agent stamped into each completed result."""
    limit = asyncio.Semaphore(concurrency)

    async def one(record: Execution) -> None:
        assert record.execution_id is not None
        async with limit:
            body = await client.get(record.execution_id)
        result = body.get("result") or {}
        record.resumed_at = result.get("resumed_at")
        record.replay_seconds = result.get("replay_seconds")

    await asyncio.gather(*(one(e) for e in run.completed()))
