"""Issue 19's bus contract: a consumer handles the messages of different keys (executions)
concurrently, up to its limit, and those of one key strictly in order, one at a time; a crash
redelivers exactly what was not committed, which is every unfinished message (none skipped) and
perhaps some finished ones, which the idempotency guard absorbs; and a consumer with its window
full stops fetching instead of buffering a backlog.

The same tests run on each bus in ``BUSES``: a kind is one function that opens a ``BusLog`` (a
topic and a consumer group that outlive the consumers run on them). On Kafka the topic has one
partition, so concurrency comes from keys alone.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared.bus import Delivery, DeliveryHandler, ensure_topics
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.kafka_consumer import KeyedKafkaConsumer
from shared.settings import CommonSettings
from tests.eventually import eventually

LIMIT, MAX_HELD = 8, 32
MESSAGES, KEYS = 200, 20
TOPIC, GROUP = "execution.requested", "concurrency-contract"


class RunningBus(Protocol):
    """A consumer of the log running with its handler."""

    async def publish(self, key: str, body: bytes) -> None: ...

    def held(self) -> int:
        """Messages the consumer holds: in flight, or fetched and waiting behind their key."""
        ...

    async def crash(self) -> None:
        """Stop abruptly with messages in flight: they are not finished, and not committed."""
        ...


class BusLog(Protocol):
    """One topic (one partition) and one consumer group on it, kept across consumer runs."""

    def run(
        self, handler: DeliveryHandler, *, limit: int, max_held: int
    ) -> AbstractAsyncContextManager[RunningBus]: ...

    async def resume_offset(self) -> int:
        """Where the group's next consumer starts: the first offset not committed (Kafka's
        convention). Asked while no consumer runs."""
        ...


@dataclass
class InProcessRun:
    bus: InProcessBus

    async def publish(self, key: str, body: bytes) -> None:
        await self.bus.publish_raw(body, TOPIC, key=key)

    def held(self) -> int:
        return self.bus.held(GROUP, TOPIC)

    async def crash(self) -> None:
        await self.bus.stop()  # cancels what is in flight; it is redelivered on the next start


@dataclass
class InProcessLog:
    path: Path

    @asynccontextmanager
    async def run(
        self, handler: DeliveryHandler, *, limit: int, max_held: int
    ) -> AsyncIterator[RunningBus]:
        bus = InProcessBus(self.path)
        bus.add_consumer(TOPIC, GROUP, handler, limit=limit, max_held=max_held)
        await bus.start()
        try:
            yield InProcessRun(bus)
        finally:
            await bus.stop()  # a no-op after a crash

    async def resume_offset(self) -> int:
        # The bus stores the highest id done (everything below it is done too).
        with sqlite3.connect(self.path) as db:
            row = db.execute(
                "SELECT committed FROM bus_offsets WHERE group_id = ? AND topic = ?",
                (GROUP, TOPIC),
            ).fetchone()
        return (int(row[0]) if row else 0) + 1


@asynccontextmanager
async def inprocess_log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BusLog]:
    yield InProcessLog(tmp_path / "bus.sqlite")


@dataclass
class KafkaRun:
    bus: KafkaBus
    topic: str

    @property
    def consumer(self) -> KeyedKafkaConsumer:
        [consumer] = self.bus.consumers
        return consumer

    async def publish(self, key: str, body: bytes) -> None:
        await self.bus.broker.publish(body, topic=self.topic, key=key.encode())

    def held(self) -> int:
        return self.consumer.held

    async def crash(self) -> None:
        await self.consumer.abort()


@dataclass
class KafkaLog:
    settings: CommonSettings
    group: str

    @property
    def topic(self) -> str:
        return self.settings.topics.requested

    @asynccontextmanager
    async def run(
        self, handler: DeliveryHandler, *, limit: int, max_held: int
    ) -> AsyncIterator[RunningBus]:
        bus = KafkaBus(self.settings, "concurrency-contract")
        bus.add_consumer(self.topic, self.group, handler, limit=limit, max_held=max_held)
        await bus.start()
        try:
            yield KafkaRun(bus, self.topic)
        finally:
            await bus.stop()  # after a crash: only the publisher

    async def resume_offset(self) -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.settings.kafka_bootstrap_servers)
        await admin.start()
        try:
            committed = await admin.list_consumer_group_offsets(self.group)
        finally:
            await admin.close()
        found = committed.get(TopicPartition(self.topic, 0))
        return found.offset if found is not None and found.offset >= 0 else 0


async def one_partition_topics(request: pytest.FixtureRequest, prefix: str) -> CommonSettings:
    """Settings naming topics of one partition under a prefix of their own, created."""
    settings = CommonSettings(
        kafka_bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
        topic_prefix=f"{prefix}.",
        topic_partitions=1,
    )
    await ensure_topics(settings)
    return settings


@asynccontextmanager
async def kafka_log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BusLog]:
    run = uuid.uuid4().hex[:8]
    settings = await one_partition_topics(request, f"concurrency-{run}")
    yield KafkaLog(settings, group=f"concurrency-{run}")


BUSES: dict[str, Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[BusLog]]] = {
    "inprocess": inprocess_log,
    "kafka": kafka_log,
}
"""The buses under test, by kind."""
NEEDS_INFRASTRUCTURE = {"kafka"}
"""Kinds that run only with the integration tests (they need a broker)."""


@pytest.fixture(
    params=[
        pytest.param(kind, marks=pytest.mark.integration) if kind in NEEDS_INFRASTRUCTURE else kind
        for kind in BUSES
    ]
)
async def log(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BusLog]:
    async with BUSES[request.param](request, tmp_path) as opened:
        yield opened


@dataclass
class Effects:
    """What the handlers did, across consumer runs (it outlives a crash, as a database would):
    the idempotency guard (the ids applied) and the effects in the order applied."""

    guard: set[str] = field(default_factory=set)
    applied: list[str] = field(default_factory=list)
    absorbed: list[str] = field(default_factory=list)
    """Messages delivered again after they were applied: the guard stopped them."""

    def apply(self, message: str) -> None:
        if message in self.guard:
            self.absorbed.append(message)
            return
        self.guard.add(message)
        self.applied.append(message)


@dataclass
class Recorder:
    """A handler that takes a little time per message (seeded) and records what overlapped.
    ``blocks`` says which messages never finish (until the consumer is stopped); while ``gate``
    is given and not set, none does."""

    effects: Effects
    name: str = "concurrency-recorder"
    blocks: Callable[[Recorder, str], bool] = lambda recorder, message: False
    gate: asyncio.Event | None = None
    max_seconds: float = 0.01
    rng: random.Random = field(default_factory=lambda: random.Random(19))
    delivered: list[str] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    running_keys: set[str] = field(default_factory=set)
    overlaps: list[str] = field(default_factory=list)
    """Messages that started while another of their key was in flight."""
    in_flight: int = 0
    peak: int = 0

    async def deliver(self, delivery: Delivery) -> None:
        message, key = delivery.body.decode(), str(delivery.key)
        self.delivered.append(message)
        self.offsets[message] = delivery.offset
        if key in self.running_keys:
            self.overlaps.append(message)
        self.running_keys.add(key)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.blocks(self, message):
                self.blocked.append(message)
                await asyncio.Event().wait()  # until the consumer is stopped
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(self.rng.uniform(self.max_seconds / 10, self.max_seconds))
            self.effects.apply(message)
            self.finished.append(message)
        finally:
            self.running_keys.discard(key)
            self.in_flight -= 1


def message_of(index: int, keys: int = KEYS) -> tuple[str, str]:
    """The key and the body of the ``index``-th message: keys take turns, ``key-3:5`` is the
    sixth message of key 3."""
    key = f"key-{index % keys}"
    return key, f"{key}:{index // keys}"


async def publish(bus: RunningBus, count: int) -> list[str]:
    messages = []
    for index in range(count):
        key, body = message_of(index)
        await bus.publish(key, body.encode())
        messages.append(body)
    return messages


def sequence(message: str) -> int:
    return int(message.rsplit(":", 1)[1])


def in_order_per_key(messages: list[str]) -> bool:
    per_key: dict[str, list[int]] = {}
    for message in messages:
        per_key.setdefault(message.rsplit(":", 1)[0], []).append(sequence(message))
    return all(seqs == sorted(seqs) and len(set(seqs)) == len(seqs) for seqs in per_key.values())


async def until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    async def probe() -> bool:
        return condition()

    await eventually(probe, bool, timeout=timeout, interval=0.01, what=what)


async def test_keys_run_concurrently_within_the_limit_each_key_in_order(log: BusLog) -> None:
    effects = Effects()
    handler = Recorder(effects)
    async with log.run(handler, limit=LIMIT, max_held=MAX_HELD) as bus:
        messages = await publish(bus, MESSAGES)
        await until(f"{MESSAGES} handled", lambda: len(handler.finished) == MESSAGES)
        await asyncio.sleep(0.1)  # a message delivered twice would show by now

    assert handler.peak <= LIMIT
    assert handler.peak >= LIMIT // 2, f"hardly concurrent: at most {handler.peak} at once"
    assert handler.overlaps == [], "two messages of one key in flight at once"
    assert in_order_per_key(handler.delivered)
    assert sorted(handler.delivered) == sorted(messages)  # each exactly once
    assert sorted(effects.applied) == sorted(messages) and effects.absorbed == []


async def test_a_crash_redelivers_what_was_unfinished_and_reapplies_nothing(log: BusLog) -> None:
    effects = Effects()

    def blocks(recorder: Recorder, message: str) -> bool:
        # One early message never finishes, holding back its key and the commit point while
        # the other keys go on; after 100 finished, every message started never finishes.
        return message == "key-0:2" or len(recorder.finished) >= MESSAGES // 2

    first = Recorder(effects, blocks=blocks)
    async with log.run(first, limit=LIMIT, max_held=MAX_HELD) as bus:
        messages = await publish(bus, MESSAGES)
        await until(f"{LIMIT} blocked", lambda: len(first.blocked) == LIMIT)
        await bus.crash()
    resume = await log.resume_offset()
    finished = set(first.finished)
    unfinished = set(messages) - finished

    second = Recorder(effects)
    async with log.run(second, limit=LIMIT, max_held=MAX_HELD):
        await until(
            f"all {MESSAGES} applied (one skipped by the crash never comes)",
            lambda: len(effects.applied) == MESSAGES,
        )
        await asyncio.sleep(0.1)  # what else is redelivered shows by now

    offsets = {**first.offsets, **second.offsets}
    assert set(offsets) == set(messages)
    redelivered = set(second.delivered)
    assert unfinished <= redelivered, "an unfinished message was skipped"
    # Exactly what was not committed comes again, and all below the commit point was finished.
    assert redelivered == {m for m in messages if offsets[m] >= resume}
    assert {m for m in messages if offsets[m] < resume} <= finished
    # Finished ones above the commit point came again (the early blocked message keeps the
    # point low); the guard absorbed each, none was applied twice.
    assert set(effects.absorbed) == finished & redelivered and effects.absorbed
    assert sorted(effects.applied) == sorted(messages)
    assert in_order_per_key(effects.applied)
    assert in_order_per_key(second.delivered)
    assert first.overlaps == second.overlaps == []
    assert first.peak <= LIMIT and second.peak <= LIMIT


async def test_a_full_window_stops_fetching(log: BusLog) -> None:
    backlog = 1000
    handler = Recorder(Effects(), gate=asyncio.Event(), max_seconds=0.001)
    held_seen: list[int] = []
    async with log.run(handler, limit=LIMIT, max_held=MAX_HELD) as bus:
        sampler = asyncio.create_task(sample(bus.held, held_seen))
        try:
            messages = await publish(bus, backlog)
            await until(f"{MAX_HELD} held", lambda: bus.held() == MAX_HELD)
            # The window holds what was fetched and not finished, and nothing finishes while
            # the gate is shut: a steady count at the bound means nothing more was fetched,
            # though the backlog is there and new publishes wake the consumer.
            for index in range(backlog, backlog + 5):
                key, body = message_of(index)
                await bus.publish(key, body.encode())
                messages.append(body)
                await asyncio.sleep(0.05)
            assert bus.held() == MAX_HELD
            assert len(handler.delivered) == handler.in_flight == LIMIT

            assert handler.gate is not None
            handler.gate.set()
            await until(f"{len(messages)} handled", lambda: len(handler.finished) == len(messages))
            await until("nothing held", lambda: bus.held() == 0)
        finally:
            sampler.cancel()

    assert max(held_seen) == MAX_HELD, "the window held more than its bound"
    assert handler.peak <= LIMIT and handler.overlaps == []
    assert sorted(handler.delivered) == sorted(messages)
    assert in_order_per_key(handler.delivered)


async def sample(probe: Callable[[], int], seen: list[int]) -> None:
    while True:
        seen.append(probe())
        await asyncio.sleep(0.002)


@pytest.mark.integration
async def test_a_key_never_runs_on_two_replicas_through_rebalances(kafka_bootstrap: str) -> None:
    """Two replicas of one group on two partitions: one joins while the other is busy, then the
    first stops (gracefully). Each rebalance lets a partition go only once its messages in flight
    are done and committed, so no key is ever in flight on both, and nothing is applied twice."""
    run = uuid.uuid4().hex[:8]
    settings = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"rebalance-{run}.",
        topic_partitions=2,
        graceful_timeout_seconds=30,
        # A member learns of a rebalance at its next heartbeat (a third of this): soon enough
        # that the first replica has not finished everything by then.
        kafka_session_timeout_ms=6_000,
    )
    await ensure_topics(settings)
    topic, group = settings.topics.requested, f"rebalance-{run}"
    effects = Effects()
    running: set[str] = set()
    overlaps: list[str] = []

    class Replica(Recorder):
        async def deliver(self, delivery: Delivery) -> None:
            key = str(delivery.key)
            if key in running:
                overlaps.append(delivery.body.decode())
            running.add(key)
            try:
                await super().deliver(delivery)
            finally:
                running.discard(key)

    def replica(name: str) -> tuple[KafkaBus, Replica]:
        bus = KafkaBus(settings, name)
        handler = Replica(effects, name=name, max_seconds=0.5)
        bus.add_consumer(topic, group, handler, limit=LIMIT, max_held=MAX_HELD)
        return bus, handler

    first, first_handler = replica("replica-1")
    second, second_handler = replica("replica-2")
    await first.start()
    try:
        messages = []
        for index in range(MESSAGES):
            key, body = message_of(index)
            await first.broker.publish(body.encode(), topic=topic, key=key.encode())
            messages.append(body)
        await until("a tenth applied", lambda: len(effects.applied) >= MESSAGES // 10)
        await second.start()  # a rebalance while the first has its limit in flight
        await until("the second replica at work", lambda: bool(second_handler.delivered), 60)
        assert len(effects.applied) < MESSAGES, "too fast to see the rebalances"
        await first.stop()  # another: the second takes both partitions
        await until(f"all {MESSAGES} applied", lambda: len(effects.applied) == MESSAGES, 60)
    finally:
        await first.stop()
        await second.stop()

    assert overlaps == [], "a key was in flight on two replicas at once"
    assert first_handler.delivered and second_handler.delivered
    assert sorted(effects.applied) == sorted(messages)  # each applied once, none lost
    assert in_order_per_key(effects.applied)


TWO_TOPICS = ("execution.requested", "execution.decisions")


@asynccontextmanager
async def two_topic_bus(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[InProcessBus | KafkaBus, list[str]]]:
    """A bus of ``kind`` that will consume two topics in one group, and their full names."""
    if kind == "inprocess":
        yield InProcessBus(tmp_path / "bus.sqlite"), list(TWO_TOPICS)
        return
    settings = await one_partition_topics(request, f"two-topics-{uuid.uuid4().hex[:8]}")
    yield KafkaBus(settings, "two-topics"), [settings.topics.requested, settings.topics.decisions]


@pytest.mark.parametrize(
    "kind", ["inprocess", pytest.param("kafka", marks=pytest.mark.integration)]
)
async def test_one_topics_full_window_holds_up_no_other_topic_of_its_group(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two topics in one group (on Kafka, one group member reads both): each has its own
    window, so while one is full behind a handler that does not finish, the other's messages
    are fetched and handled as they come; once it finishes, the full one drains too."""
    async with two_topic_bus(kind, request, tmp_path) as (bus, (stuck, free)):
        slow = Recorder(Effects(), name="stuck-topic", gate=asyncio.Event(), max_seconds=0.001)
        quick = Recorder(Effects(), name="free-topic", max_seconds=0.001)
        bus.add_consumer(stuck, GROUP, slow, limit=2, max_held=4)
        bus.add_consumer(free, GROUP, quick, limit=2, max_held=4)

        async def send(topic: str, count: int) -> list[str]:
            sent = []
            for index in range(count):
                key, body = message_of(index)
                if isinstance(bus, KafkaBus):
                    await bus.broker.publish(body.encode(), topic=topic, key=key.encode())
                else:
                    await bus.publish_raw(body.encode(), topic, key=key)
                sent.append(body)
            return sent

        await bus.start()
        try:
            held_back = await send(stuck, 40)
            await until("the stuck topic's window full", lambda: bus.held(GROUP, stuck) == 4)
            through = await send(free, 40)
            await until("the free topic handled", lambda: len(quick.finished) == 40)
            assert bus.held(GROUP, stuck) == 4 and len(slow.delivered) == 2
            assert slow.gate is not None
            slow.gate.set()
            await until("the stuck topic drained", lambda: len(slow.finished) == 40)
        finally:
            await bus.stop()
    assert sorted(quick.delivered) == sorted(through) and in_order_per_key(quick.delivered)
    assert sorted(slow.delivered) == sorted(held_back) and in_order_per_key(slow.delivered)
    assert quick.peak <= 2 and slow.peak <= 2
