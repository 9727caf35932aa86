"""A run's last writes and checks (``at_the_end``) are made together with the storing of what it
holds: all in flight at once, each finished before the run's scope ends, and a failure of any
fails the run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from services.sandbox.checkpoint_run import Known, Run, at_the_end, current_run, run_scope


class SlowSaver:
    """Stores a held checkpoint once ``release`` is set, noting who else was in flight."""

    def __init__(self, in_flight: set[str], release: asyncio.Event) -> None:
        self.in_flight = in_flight
        self.release = release
        self.seen_with: set[str] = set()

    async def write_head(self, run: Run, key: tuple[str, str], known: Known) -> None:
        self.in_flight.add("checkpoint")
        await self.release.wait()
        self.seen_with = set(self.in_flight)
        self.in_flight.discard("checkpoint")

    async def insert_write_set(self, *_: object, **__: object) -> None:
        raise AssertionError("not held here")


def step(
    name: str, in_flight: set[str], release: asyncio.Event, done: list[str]
) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        in_flight.add(name)
        await release.wait()
        in_flight.discard(name)
        done.append(name)

    return run


async def test_the_last_steps_are_in_flight_with_the_checkpoint_and_done_before_the_end() -> None:
    in_flight: set[str] = set()
    release = asyncio.Event()
    done: list[str] = []
    saver = SlowSaver(in_flight, release)

    async def body() -> None:
        async with run_scope():
            run = current_run()
            assert run is not None
            run.newest[("t", "")] = Known({"checkpoint_id": "c1"}, saver=saver)  # type: ignore[arg-type]
            at_the_end(step("progress", in_flight, release, done))
            at_the_end(step("fence check", in_flight, release, done))

    ending = asyncio.create_task(body())
    for _ in range(5):
        await asyncio.sleep(0)
    assert in_flight == {"checkpoint", "progress", "fence check"}
    release.set()
    await asyncio.wait_for(ending, timeout=5)
    assert sorted(done) == ["fence check", "progress"]
    assert saver.seen_with >= {"checkpoint"}


async def test_a_last_step_that_fails_fails_the_run_after_the_others_finish() -> None:
    finished: list[str] = []

    async def fails() -> None:
        raise ConnectionError("store unreachable")

    async def finishes() -> None:
        await asyncio.sleep(0)
        finished.append("other")

    with pytest.raises(ConnectionError):
        async with run_scope():
            at_the_end(fails)
            at_the_end(finishes)
    assert finished == ["other"]


def test_outside_a_run_nothing_is_left_for_later() -> None:
    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError):
        at_the_end(nothing)
