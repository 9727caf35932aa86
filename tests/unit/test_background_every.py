"""``shared.background.every``: the periodic loop of sweeps and gauges survives a failing tick."""

from __future__ import annotations

import asyncio
import contextlib

from structlog.testing import capture_logs

from shared.background import every


async def test_a_failing_tick_is_logged_and_the_next_one_runs() -> None:
    ticks: list[int] = []
    third = asyncio.Event()

    async def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 1:
            raise ConnectionError("database blinked")
        if len(ticks) == 3:
            third.set()

    with capture_logs() as logs:
        loop = asyncio.create_task(every(0.01, tick, failed="sweep_failed"))
        await asyncio.wait_for(third.wait(), timeout=5)
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    failures = [entry for entry in logs if entry["event"] == "sweep_failed"]
    assert len(failures) == 1 and failures[0]["log_level"] == "error"
