"""The peers' open-loop driver: the same arrivals and the same records as ``bench.load``."""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from bench import procstats
from bench.load import Execution

RunOne = Callable[[Execution], Awaitable[None]]
"""Runs one execution to its end, filling in its times (suspended, decided, completed...)."""


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _shared_cpu(pids: Mapping[str, int]) -> dict[str, float | None]:
    """CPU so far of each shared process with all its children (a server's backends)."""
    return {name: procstats.tree_cpu_seconds(pid) for name, pid in pids.items()}


def cpu_split(
    own: float,
    shared_before: Mapping[str, float | None],
    shared_after: Mapping[str, float | None],
    machine: float,
) -> dict[str, Any]:
    """The run's CPU as Interlock's runs report it: the peer's own process is what is measured
    (and charged to it); the shared processes (``infra:`` names, say its database server) are
    reported beside it; and the whole machine's busy seconds, which tell whether anything else
    ran meanwhile."""
    per_process = {"peer": round(own, 3)}
    for name, before in shared_before.items():
        after = shared_after.get(name)
        if before is not None and after is not None:
            per_process[name] = round(after - before, 3)
    return {
        "per_process_seconds": per_process,
        "measured_seconds": round(own, 3),
        "machine_busy_seconds": round(machine, 3),
    }


async def open_loop(
    run_one: RunOne,
    *,
    rate: float,
    count: int,
    timeout: float,
    shared_pids: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``count`` executions due ``rate`` a second; ``shared_pids`` are processes the peer uses
    but does not own (``infra:``-named, e.g. ``procstats.POSTGRESQL``), measured over the same
    interval and reported apart."""
    shared = dict(shared_pids or {})
    loop = asyncio.get_running_loop()
    to_wall = time.time() - loop.time()
    first = loop.time() + 0.05
    executions = [Execution(scheduled_at=first + i / rate + to_wall) for i in range(count)]
    # The shared processes first: walking /proc for them is the harness's work, not the peer's.
    shared_before = _shared_cpu(shared)
    machine_before = procstats.machine_busy_seconds()
    cpu_before = _cpu_seconds()
    started = time.time()

    async def guarded(record: Execution) -> None:
        try:
            await run_one(record)
        except Exception as exc:  # a peer's failure is reported in the results, not hidden
            record.status, record.error = "error", repr(exc)

    tasks = []
    for i, record in enumerate(executions):
        delay = first + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(guarded(record)))
    _, pending = await asyncio.wait(tasks, timeout=max(timeout - (time.time() - started), 1))
    for task in pending:
        task.cancel()
    ended = time.time()
    own = _cpu_seconds() - cpu_before
    cpu = cpu_split(
        own, shared_before, _shared_cpu(shared), procstats.machine_busy_seconds() - machine_before
    )
    return {
        "offered_rate": rate,
        "started_at": started,
        "ended_at": ended,
        "timed_out": bool(pending),
        "cpu": cpu,
        "executions": [asdict(e) for e in executions],
    }
