"""The peers' open-loop driver: the same arrivals and the same records as ``bench.load``."""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from bench.load import Execution

RunOne = Callable[[Execution], Awaitable[None]]
"""Runs one execution to its end, filling in its times (suspended, decided, completed...)."""


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def open_loop(run_one: RunOne, *, rate: float, count: int, timeout: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    to_wall = time.time() - loop.time()
    first = loop.time() + 0.05
    executions = [Execution(scheduled_at=first + i / rate + to_wall) for i in range(count)]
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
    cpu = round(_cpu_seconds() - cpu_before, 3)
    return {
        "offered_rate": rate,
        "started_at": started,
        "ended_at": ended,
        "timed_out": bool(pending),
        "cpu": {"per_process_seconds": {"peer": cpu}, "measured_seconds": cpu},
        "executions": [asdict(e) for e in executions],
    }
