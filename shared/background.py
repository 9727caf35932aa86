"""Periodic loops a service runs beside its consumers (deadline sweeps, outbox delivery,
gauges), started after the broker and cancelled before it stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)

Hook = Callable[[], Awaitable[None]]


def background_hooks(*loops: Callable[[], Awaitable[None]]) -> tuple[Hook, Hook]:
    """A start hook that runs each loop as a task, and a stop hook that cancels them all."""
    running: list[asyncio.Task[None]] = []

    async def start() -> None:
        running.extend(asyncio.create_task(_as_coroutine(loop)) for loop in loops)

    async def stop() -> None:
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        running.clear()

    return start, stop


async def _as_coroutine(loop: Callable[[], Awaitable[None]]) -> None:
    await loop()


async def every(
    seconds: float, tick: Callable[[], Awaitable[object]], *, failed: str, level: str = "error"
) -> None:
    """Run ``tick`` every ``seconds``, forever. A failing tick (the database or the broker
    blinked) is logged as ``failed`` and the next one retries: the loop itself never dies."""
    while True:
        try:
            await tick()
        except Exception:
            getattr(log, level)(failed, exc_info=True)
        await asyncio.sleep(seconds)
