"""The in-process bus's pumps (issue 19), beyond the bus contract of
tests/contract/test_bus_concurrency.py: messages with no key do not wait for each other, a pump
neither reads while its window is full nor spins while it is idle, commits are coalesced (and
what was finished is committed on stop), and retention never deletes a message not committed
though later ones are finished."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from shared import inprocess_bus
from shared.bus import Delivery
from shared.inprocess_bus import InProcessBus
from tests.eventually import eventually

TOPIC, GROUP = "execution.requested", "g"


@dataclass
class Gated:
    """A consumer that holds each message until its gate opens (all gates open: ``open_all``)."""

    name: str = "gated"
    gates: dict[bytes, asyncio.Event] = field(default_factory=dict)
    started: list[bytes] = field(default_factory=list)
    finished: list[bytes] = field(default_factory=list)
    everything_open: bool = False

    def gate(self, body: bytes) -> asyncio.Event:
        gate = self.gates.setdefault(body, asyncio.Event())
        if self.everything_open:
            gate.set()
        return gate

    def open(self, body: bytes) -> None:
        self.gate(body).set()

    def open_all(self) -> None:
        self.everything_open = True
        for gate in self.gates.values():
            gate.set()

    async def deliver(self, delivery: Delivery) -> None:
        self.started.append(delivery.body)
        await self.gate(delivery.body).wait()
        self.finished.append(delivery.body)

    @property
    def in_flight(self) -> int:
        return len(self.started) - len(self.finished)


@asynccontextmanager
async def running(path: Path, consumer: Gated, **limits: int) -> AsyncIterator[InProcessBus]:
    bus = InProcessBus(path)
    bus.add_consumer(TOPIC, GROUP, consumer, **limits)
    await bus.start()
    try:
        yield bus
    finally:
        await bus.stop()


async def until(what: str, condition: Callable[[], bool]) -> None:
    async def probe() -> bool:
        return condition()

    await eventually(probe, bool, timeout=10, interval=0.01, what=what)


def committed(path: Path) -> int:
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT committed FROM bus_offsets WHERE group_id = ? AND topic = ?", (GROUP, TOPIC)
        ).fetchone()
    return int(row[0]) if row else 0


def stored(path: Path) -> int:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT COUNT(*) FROM bus_messages WHERE topic = ?", (TOPIC,)).fetchone()
    return int(row[0])


def counting(
    monkeypatch: pytest.MonkeyPatch, name: str, before: Callable[[], Awaitable[None]] | None = None
) -> list[int]:
    """Count the calls of ``InProcessBus.<name>`` (awaiting ``before`` first, if given)."""
    calls: list[int] = []
    original = getattr(InProcessBus, name)

    async def wrapper(self: InProcessBus, *args: Any) -> Any:
        calls.append(len(calls))
        if before is not None:
            await before()
        return await original(self, *args)

    monkeypatch.setattr(InProcessBus, name, wrapper)
    return calls


async def test_messages_with_no_key_do_not_wait_for_each_other(tmp_path: Path) -> None:
    consumer = Gated()
    async with running(tmp_path / "bus.sqlite", consumer, limit=4) as bus:
        for i in range(4):
            await bus.publish_raw(f"keyless {i}".encode(), TOPIC, key=None)
        await bus.publish_raw(b"keyed 0", TOPIC, key="k")
        await bus.publish_raw(b"keyed 1", TOPIC, key="k")
        await until("4 keyless in flight", lambda: consumer.in_flight == 4)
        consumer.open(b"keyless 0")
        # The freed slot goes to the first keyed message; its successor waits behind it.
        await until("keyed 0 started", lambda: b"keyed 0" in consumer.started)
        await asyncio.sleep(0.05)
        assert b"keyed 1" not in consumer.started
        consumer.open_all()
        await until("all finished", lambda: len(consumer.finished) == 6)
    assert consumer.started.index(b"keyed 0") < consumer.started.index(b"keyed 1")


async def test_a_full_window_reads_nothing_and_an_idle_pump_does_not_spin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = counting(monkeypatch, "_rows_above")
    consumer = Gated()
    async with running(tmp_path / "bus.sqlite", consumer, limit=2, max_held=4) as bus:
        await asyncio.sleep(0.2)
        assert len(reads) == 1  # idle: one read at start, then it sleeps until woken
        for i in range(4):
            await bus.publish_raw(f"m{i}".encode(), TOPIC, key=f"k{i}")
        await until("the window full", lambda: bus.held(GROUP, TOPIC) == 4)
        full_at = len(reads)
        for i in range(4, 20):  # each publish wakes the pump: it finds the window full
            await bus.publish_raw(f"m{i}".encode(), TOPIC, key=f"k{i}")
        await asyncio.sleep(0.1)
        assert len(reads) == full_at and bus.held(GROUP, TOPIC) == 4
        assert consumer.in_flight == 2

        consumer.open(b"m0")  # room for one: the pump reads again, one row
        await until("m2 started in m0's slot", lambda: b"m2" in consumer.started)
        await until("refilled", lambda: bus.held(GROUP, TOPIC) == 4)
        assert len(reads) == full_at + 1
        consumer.open_all()
        await until("all finished", lambda: len(consumer.finished) == 20)
        assert bus.held(GROUP, TOPIC) == 0


async def test_commits_are_coalesced_and_a_stop_commits_what_was_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = asyncio.Event()

    async def maybe_stuck() -> None:
        if stuck.is_set():
            await asyncio.sleep(3600)  # a commit still being written when the bus stops

    commits = counting(monkeypatch, "_commit", before=maybe_stuck)
    path = tmp_path / "bus.sqlite"
    consumer = Gated(everything_open=True)
    async with running(path, consumer, limit=8, max_held=32) as bus:
        for i in range(100):
            await bus.publish_raw(f"m{i}".encode(), TOPIC, key=f"k{i % 10}")
        await until("all finished", lambda: len(consumer.finished) == 100)
        await until("all committed", lambda: committed(path) == 100)
        assert len(commits) < 100

        stuck.set()
        for i in range(100, 105):
            await bus.publish_raw(f"m{i}".encode(), TOPIC, key=f"k{i % 10}")
        await until("all finished", lambda: len(consumer.finished) == 105)
        await asyncio.sleep(0.05)
        assert committed(path) == 100  # the commit of the new ones is stuck
        stuck.clear()
    assert committed(path) == 105  # the stop cancelled it and wrote the newest point


async def test_retention_keeps_what_a_message_in_flight_holds_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_SECONDS", 3600.0)
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_COMMITS", 10_000)
    path = tmp_path / "bus.sqlite"
    consumer = Gated()
    async with running(path, consumer, limit=4) as bus:
        await bus.publish_raw(b"slow", TOPIC, key="a")
        for i in range(5):
            await bus.publish_raw(f"fast {i}".encode(), TOPIC, key=f"b{i}")
            consumer.open(f"fast {i}".encode())
        await until("the fast ones finished", lambda: len(consumer.finished) == 5)
        await asyncio.sleep(0.05)
        assert committed(path) == 0 and await bus.lag() == 6
        assert await bus.prune() == 0 and stored(path) == 6

        consumer.open(b"slow")
        await until("all committed", lambda: committed(path) == 6)
        assert await bus.prune() == 6 and stored(path) == 0


def test_limits_are_checked_when_a_consumer_is_added(tmp_path: Path) -> None:
    bus = InProcessBus(tmp_path / "bus.sqlite")
    with pytest.raises(ValueError):
        bus.add_consumer(TOPIC, GROUP, Gated(), limit=0)
    with pytest.raises(ValueError):
        bus.add_consumer(TOPIC, GROUP, Gated(), limit=4, max_held=2)
    bus.add_consumer(TOPIC, GROUP, Gated(), limit=4)
    with pytest.raises(ValueError, match="already has a consumer"):
        bus.add_consumer(TOPIC, GROUP, Gated())
    assert bus.held(GROUP, TOPIC) == 0  # not running
