"""The listener contract (``shared/bus.py``, ``ListenerHost``), the same on every bus: a listener
hears every message of its topic published after it started listening, each key's in publish
order, and nothing from before; one that raises misses nothing else, nor do the others; a
consumer group on the topic still gets everything (listeners take nothing from groups); a
stopped bus's listeners hear nothing more, and the stop is quick.

A kind of bus is one entry of ``OPENERS``: a topic (``Medium``) that several ``ListeningBus``es
can be opened on, as processes share a Kafka topic. On Kafka the topic has several partitions,
so that a listener must hear them all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest
from structlog.testing import capture_logs

from shared.bus import Delivery, Listener, ListenerHost, ensure_topics
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.direct_bus import DirectBus
from tests.eventually import eventually

TOPIC = "execution.requested"
MESSAGES, KEYS = 50, 5
KAFKA_PARTITIONS = 3
STOP_SECONDS = 5.0
"""A stop takes at most this long (it waits for nothing a listener holds)."""


class ListeningBus(Protocol):
    """One bus (one process, on Kafka) on the medium's topic."""

    def add_listener(self, listener: Listener) -> None: ...

    def add_consumer(self, group_id: str, consumer: Taker) -> None: ...

    async def start_publishing(self) -> None:
        """Open what publishing needs; the listeners added so far do not hear yet (Kafka: they
        start with the consumers)."""
        ...

    async def start_listening(self) -> None:
        """From its return, the listeners added so far hear what is published."""
        ...

    async def publish(self, key: str, body: bytes) -> None: ...

    async def stop(self) -> None: ...


class Medium(Protocol):
    """A topic that outlives the buses opened on it."""

    @property
    def topic(self) -> str: ...

    def open(self) -> ListeningBus:
        """A new bus on the topic, not started (it is stopped when the test ends)."""
        ...


@dataclass
class DirectListening:
    bus: DirectBus

    def add_listener(self, listener: Listener) -> None:
        host: ListenerHost = self.bus  # each bus is a ListenerHost: mypy checks these lines
        host.add_listener(TOPIC, listener)

    def add_consumer(self, group_id: str, consumer: Taker) -> None:
        self.bus.add_consumer(TOPIC, group_id, consumer)

    async def start_publishing(self) -> None:
        pass  # nothing to start

    async def start_listening(self) -> None:
        pass  # a listener hears from when it is added

    async def publish(self, key: str, body: bytes) -> None:
        await self.bus.publish_raw(body, TOPIC, key=key)

    async def stop(self) -> None:
        pass  # nothing to stop


@dataclass
class DirectMedium:
    """Each direct bus is a world of its own: one process with nothing shared."""

    topic: str = TOPIC

    def open(self) -> ListeningBus:
        return DirectListening(DirectBus())


@dataclass
class InProcessListening:
    bus: InProcessBus

    def add_listener(self, listener: Listener) -> None:
        host: ListenerHost = self.bus
        host.add_listener(TOPIC, listener)

    def add_consumer(self, group_id: str, consumer: Taker) -> None:
        self.bus.add_consumer(TOPIC, group_id, consumer, limit=4)

    async def start_publishing(self) -> None:
        await self.bus.start()

    async def start_listening(self) -> None:
        pass  # a listener hears from when it is added, started or not

    async def publish(self, key: str, body: bytes) -> None:
        await self.bus.publish_raw(body, TOPIC, key=key)

    async def stop(self) -> None:
        await self.bus.stop()


@dataclass
class InProcessMedium:
    path: Path
    topic: str = TOPIC
    buses: list[InProcessListening] = field(default_factory=list)

    def open(self) -> ListeningBus:
        opened = InProcessListening(InProcessBus(self.path))
        self.buses.append(opened)
        return opened


@dataclass
class KafkaListening:
    bus: KafkaBus
    topic: str

    def add_listener(self, listener: Listener) -> None:
        host: ListenerHost = self.bus
        host.add_listener(self.topic, listener)

    def add_consumer(self, group_id: str, consumer: Taker) -> None:
        self.bus.add_consumer(self.topic, group_id, consumer, limit=4)

    async def start_publishing(self) -> None:
        await self.bus.broker.start()

    async def start_listening(self) -> None:
        await self.bus.start_consumers()

    async def publish(self, key: str, body: bytes) -> None:
        await self.bus.broker.publish(body, topic=self.topic, key=key.encode())

    async def stop(self) -> None:
        await self.bus.stop()


@dataclass
class KafkaMedium:
    settings: CommonSettings
    buses: list[KafkaListening] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return self.settings.topics.requested

    def open(self) -> ListeningBus:
        opened = KafkaListening(
            KafkaBus(self.settings, f"listeners-contract-{len(self.buses)}"), self.topic
        )
        self.buses.append(opened)
        return opened


@asynccontextmanager
async def direct_medium(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Medium]:
    yield DirectMedium()


@asynccontextmanager
async def inprocess_medium(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Medium]:
    medium = InProcessMedium(tmp_path / "bus.sqlite")
    try:
        yield medium
    finally:
        for opened in medium.buses:
            await opened.stop()


@asynccontextmanager
async def kafka_medium(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Medium]:
    settings = CommonSettings(
        kafka_bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
        topic_prefix=f"listeners-{uuid.uuid4().hex[:8]}.",
        topic_partitions=KAFKA_PARTITIONS,
    )
    await ensure_topics(settings)
    medium = KafkaMedium(settings)
    try:
        yield medium
    finally:
        for opened in medium.buses:
            await opened.stop()


OPENERS: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[Medium]]] = {
    "direct": direct_medium,
    "inprocess": inprocess_medium,
    "kafka": kafka_medium,
}
"""The buses under test, by kind."""
NEEDS_INFRASTRUCTURE = {"kafka"}
"""Kinds that run only with the integration tests (they need a broker)."""


@pytest.fixture(
    params=[
        pytest.param(kind, marks=pytest.mark.integration) if kind in NEEDS_INFRASTRUCTURE else kind
        for kind in OPENERS
    ]
)
async def medium(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Medium]:
    async with OPENERS[request.param](request, tmp_path) as opened:
        yield opened


@dataclass
class Ear:
    """A listener that keeps what it hears; ``fails_on`` names a body it raises on (after
    keeping it: it was heard)."""

    heard: list[Delivery] = field(default_factory=list)
    fails_on: str | None = None

    def __call__(self, delivery: Delivery) -> None:
        self.heard.append(delivery)
        if delivery.body.decode() == self.fails_on:
            raise RuntimeError(f"listener fails on {self.fails_on}")

    def by_key(self) -> dict[str, list[str]]:
        return by_key(self.heard)


@dataclass
class Taker:
    """A consumer group's consumer that keeps what it is given."""

    name: str = "listeners-contract-taker"
    taken: list[Delivery] = field(default_factory=list)

    async def deliver(self, delivery: Delivery) -> None:
        self.taken.append(delivery)


def by_key(deliveries: list[Delivery]) -> dict[str, list[str]]:
    """The bodies of each key in the order they came, after checking each body's key."""
    seen: dict[str, list[str]] = {}
    for delivery in deliveries:
        body = delivery.body.decode()
        assert delivery.key == body.split(":")[0], f"{body} came with key {delivery.key}"
        seen.setdefault(str(delivery.key), []).append(body)
    return seen


def by_key_of(bodies: list[str]) -> dict[str, list[str]]:
    """Published bodies, per key in publish order: what each listener must hear."""
    seen: dict[str, list[str]] = {}
    for body in bodies:
        seen.setdefault(body.split(":")[0], []).append(body)
    return seen


async def publish(bus: ListeningBus, count: int, *, start: int = 0) -> list[str]:
    """Publish ``count`` messages, keys taking turns: ``key-3:5`` is key 3's sixth message."""
    bodies = []
    for index in range(start, start + count):
        key = f"key-{index % KEYS}"
        body = f"{key}:{index // KEYS}"
        await bus.publish(key, body.encode())
        bodies.append(body)
    return bodies


async def until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    async def probe() -> bool:
        return condition()

    await eventually(probe, bool, timeout=timeout, interval=0.01, what=what)


async def started(medium: Medium, *ears: Ear) -> ListeningBus:
    bus = medium.open()
    for ear in ears:
        bus.add_listener(ear)
    await bus.start_publishing()
    await bus.start_listening()
    return bus


async def test_every_listener_hears_every_message_each_key_in_order(medium: Medium) -> None:
    first, second = Ear(), Ear()
    bus = await started(medium, first, second)

    published = await publish(bus, MESSAGES)
    await until("both heard all", lambda: len(first.heard) == len(second.heard) == MESSAGES)

    # Exactly the messages, each once, in publish order within each key.
    assert first.by_key() == second.by_key() == by_key_of(published)
    assert {d.topic for d in [*first.heard, *second.heard]} == {medium.topic}


async def test_a_raising_listener_misses_nothing_else_nor_do_the_others(medium: Medium) -> None:
    failing, other = Ear(fails_on="key-2:3"), Ear()
    with capture_logs() as logs:
        bus = await started(medium, failing, other)
        published = await publish(bus, MESSAGES)
        await until("both heard all", lambda: len(failing.heard) == len(other.heard) == MESSAGES)

    assert failing.by_key() == other.by_key() == by_key_of(published)
    failures = [entry for entry in logs if entry["event"] == "listener.failed"]
    assert len(failures) == 1 and failures[0]["log_level"] == "error"
    assert failures[0]["exc_info"] is True


async def test_a_consumer_group_still_gets_every_message(medium: Medium) -> None:
    ear, taker = Ear(), Taker()
    bus = medium.open()
    bus.add_listener(ear)
    bus.add_consumer(f"listeners-{uuid.uuid4().hex[:8]}", taker)
    await bus.start_publishing()
    await bus.start_listening()

    published = await publish(bus, MESSAGES)
    await until("all heard and taken", lambda: len(ear.heard) == len(taker.taken) == MESSAGES)

    assert ear.by_key() == by_key(taker.taken) == by_key_of(published)


async def test_what_was_published_before_listening_is_not_heard(medium: Medium) -> None:
    ear = Ear()
    bus = medium.open()
    await bus.start_publishing()
    before = await publish(bus, MESSAGES)
    bus.add_listener(ear)
    await bus.start_listening()
    after = await publish(bus, MESSAGES, start=MESSAGES)

    # Same keys before and after: in order per key, what came before would be heard first.
    await until("all after heard", lambda: len(ear.heard) == MESSAGES)
    assert ear.by_key() == by_key_of(after)
    assert not {d.body.decode() for d in ear.heard} & set(before)


async def test_a_stopped_bus_hears_nothing_more_and_stops_quickly(medium: Medium) -> None:
    ear = Ear()
    bus = await started(medium, ear)
    first = await publish(bus, MESSAGES)
    await until("all heard", lambda: len(ear.heard) == MESSAGES)

    began = time.monotonic()
    await bus.stop()
    assert time.monotonic() - began < STOP_SECONDS

    added_after_stop, elsewhere = Ear(), Ear()
    bus.add_listener(added_after_stop)  # the bus is not started again: it never hears
    other = await started(medium, elsewhere)  # another process, on the same topic
    second = await publish(other, MESSAGES, start=MESSAGES)
    await until("the other bus heard all", lambda: len(elsewhere.heard) == MESSAGES)

    assert ear.by_key() == by_key_of(first)
    assert added_after_stop.heard == []
    assert elsewhere.by_key() == by_key_of(second)
