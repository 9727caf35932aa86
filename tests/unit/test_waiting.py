"""``wait_event`` never loses a cancellation, where ``asyncio.wait_for`` does on Python 3.11 when
the event is set as the waiter is cancelled (the stop of a consumer whose loop was just woken)."""

from __future__ import annotations

import asyncio
import contextlib

from shared.waiting import wait_event


async def test_a_set_event_ends_the_wait_and_a_timeout_says_so() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 1.0) is True


async def test_a_cancellation_as_the_event_is_set_is_never_lost() -> None:
    async def loop(event: asyncio.Event) -> None:
        while True:  # a consumer's loop: wait for a wake-up, look around, wait again
            event.clear()
            await wait_event(event, 1.0)

    for _ in range(50):
        event = asyncio.Event()
        task = asyncio.create_task(loop(event))
        await asyncio.sleep(0)  # the loop is waiting
        event.set()  # it is woken ...
        task.cancel()  # ... and stopped in the same turn
        done, _ = await asyncio.wait({task}, timeout=1.0)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        assert done and task.cancelled(), "the cancellation was lost: the loop goes on"
