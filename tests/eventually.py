"""Wait for a condition without sleeping blindly: poll until it holds or the deadline passes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    check: Callable[[T], bool],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Call ``probe`` until ``check`` accepts its value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if check(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}; last value: {last!r}"
            )
        await asyncio.sleep(interval)
