"""The in-process bus of ``interlock dev`` deletes a message once every consumer group of its
topic has committed past it, and nothing else: a slow group keeps what it has not read, across a
restart, and ``lag()`` counts the same before and after pruning."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shared import inprocess_bus
from shared.bus import Delivery
from shared.inprocess_bus import InProcessBus
from tests.eventually import eventually

TOPIC = "execution.requested"
UNREAD = "execution.dead_lettered"


@dataclass
class Reader:
    """A consumer that records what it got; ``gate`` (when set) admits one message per release."""

    name: str
    gate: asyncio.Semaphore | None = None
    got: list[bytes] = field(default_factory=list)

    async def deliver(self, delivery: Delivery) -> None:
        if self.gate is not None:
            await self.gate.acquire()
        self.got.append(delivery.body)


def stored(path: Path, topic: str = TOPIC) -> list[bytes]:
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT body FROM bus_messages WHERE topic = ? ORDER BY id", (topic,)
        ).fetchall()
    return [bytes(row[0]) for row in rows]


@asynccontextmanager
async def running(path: Path, *readers: tuple[str, Reader]) -> AsyncIterator[InProcessBus]:
    bus = InProcessBus(path)
    for group, reader in readers:
        bus.add_consumer(TOPIC, group, reader)
    await bus.start()
    try:
        yield bus
    finally:
        await bus.stop()


async def got(reader: Reader, count: int) -> list[bytes]:
    async def probe() -> list[bytes]:
        return list(reader.got)

    return await eventually(probe, lambda g: len(g) >= count, what=f"{reader.name}: {count}")


async def lag_is(bus: InProcessBus, expected: int) -> None:
    await eventually(bus.lag, lambda lag: lag == expected, what=f"lag {expected}")


@pytest.fixture(autouse=True)
def prune_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pruning by itself is timed; these tests call ``prune()`` to know when it ran."""
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_SECONDS", 3600.0)
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_COMMITS", 10_000)


async def test_only_what_every_group_committed_is_deleted_and_a_restart_loses_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bus.sqlite"
    fast, slow = Reader("fast"), Reader("slow", gate=asyncio.Semaphore(0))
    bodies = [f"message {i}".encode() for i in range(5)]
    async with running(path, ("fast", fast), ("slow", slow)) as bus:
        for body in bodies:
            await bus.publish_raw(body, TOPIC, key="k")
        assert await got(fast, 5) == bodies
        await lag_is(bus, 5)  # all of the slow group's
        assert await bus.prune() == 0
        assert stored(path) == bodies

        assert slow.gate is not None
        for _ in range(3):
            slow.gate.release()
        await lag_is(bus, 2)
        assert await bus.prune() == 3
        assert stored(path) == bodies[3:]
        assert await bus.lag() == 2  # the same count as before the prune

    # Stopped with the slow group's fourth message in hand: it is delivered again, nothing else.
    fast_again, slow_again = Reader("fast"), Reader("slow")
    async with running(path, ("fast", fast_again), ("slow", slow_again)) as bus:
        assert await got(slow_again, 2) == bodies[3:]
        await lag_is(bus, 0)
        assert fast_again.got == []
        assert await bus.prune() == 2
        assert stored(path) == []
        # Ids go on from where they were: a new message is above every committed offset.
        await bus.publish_raw(b"after", TOPIC, key="k")
        assert await got(fast_again, 1) == [b"after"] and await got(slow_again, 3)
        await lag_is(bus, 0)
    assert stored(path) == []  # stopping prunes what was committed since


async def test_a_group_with_no_offset_yet_holds_its_topic(tmp_path: Path) -> None:
    path = tmp_path / "bus.sqlite"
    early = Reader("early")
    async with running(path, ("early", early)) as bus:
        await bus.publish_raw(b"one", TOPIC, key="k")
        await got(early, 1)
        await lag_is(bus, 0)
    assert stored(path) == []

    # A group added later starts above what was pruned, like Kafka past a topic's retention;
    # until it commits, what it has not read stays.
    late = Reader("late", gate=asyncio.Semaphore(0))
    async with running(path, ("early", Reader("early")), ("late", late)) as bus:
        await bus.publish_raw(b"two", TOPIC, key="k")
        await lag_is(bus, 1)
        assert await bus.prune() == 0
        assert stored(path) == [b"two"]


async def test_a_topic_nobody_reads_keeps_its_newest_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess_bus, "KEEP_UNCONSUMED", 3)
    path = tmp_path / "bus.sqlite"
    async with running(path, ("g", Reader("g"))) as bus:
        for i in range(5):
            await bus.publish_raw(f"letter {i}".encode(), UNREAD, key="k")
        assert await bus.prune() == 2
        assert stored(path, UNREAD) == [f"letter {i}".encode() for i in (2, 3, 4)]
        assert await bus.prune() == 0


async def test_delivered_messages_are_pruned_without_being_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_SECONDS", 0.0)
    path = tmp_path / "bus.sqlite"
    reader = Reader("r")
    async with running(path, ("g", reader)) as bus:
        for i in range(3):
            await bus.publish_raw(f"m{i}".encode(), TOPIC, key="k")
        await got(reader, 3)

        async def rows() -> list[bytes]:
            return stored(path)

        await eventually(rows, lambda r: r == [], what="the delivered messages pruned")
        assert await bus.lag() == 0


async def test_a_topic_only_listeners_hear_is_told_and_never_written(tmp_path: Path) -> None:
    path = tmp_path / "bus.sqlite"
    heard: list[tuple[int, bytes]] = []
    async with running(path) as bus:
        bus.add_listener(UNREAD, lambda d: heard.append((d.offset, d.body)))
        for body in (b"a", b"b"):
            await bus.publish_raw(body, UNREAD, key="k")
    assert heard == [(1, b"a"), (2, b"b")]
    assert stored(path, UNREAD) == []
