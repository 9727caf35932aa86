"""``publish_in_order`` (shared/bus.py): several messages a handler publishes together arrive
all, each topic's in the order given, whether the publisher sends them as one batch (Kafka: one
produce request; the in-process bus: one transaction) or one by one (the direct bus). Observed
with listeners, which the listener contract (test_bus_listeners.py) shows hear every message in
publish order."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from pydantic import BaseModel

from shared.bus import (
    BatchPublisher,
    Delivery,
    EventPublisher,
    Outgoing,
    ensure_topics,
    publish_in_order,
)
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.direct_bus import DirectBus
from tests.eventually import eventually

ROUNDS = 20


class Note(BaseModel):
    type: str = "note"
    n: int


@asynccontextmanager
async def kafka(request: pytest.FixtureRequest, _: Path) -> AsyncIterator[tuple[object, str, str]]:
    settings = CommonSettings(
        kafka_bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
        topic_prefix=f"in-order-{uuid.uuid4().hex[:8]}.",
        topic_partitions=3,
    )
    await ensure_topics(settings)
    bus = KafkaBus(settings, "in-order-test")
    yield bus, settings.topics.status, settings.topics.activity


@asynccontextmanager
async def inprocess(_: pytest.FixtureRequest, tmp: Path) -> AsyncIterator[tuple[object, str, str]]:
    yield InProcessBus(tmp / "bus.sqlite"), "a", "b"


@asynccontextmanager
async def direct(_: pytest.FixtureRequest, __: Path) -> AsyncIterator[tuple[object, str, str]]:
    yield DirectBus(), "a", "b"


@pytest.mark.parametrize(
    "open_bus",
    [direct, inprocess, pytest.param(kafka, marks=pytest.mark.integration)],
    ids=["direct", "inprocess", "kafka"],
)
async def test_messages_published_together_arrive_all_in_order_per_topic(
    open_bus: object, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_bus(request, tmp_path) as (bus, first, second):  # type: ignore[operator]
        heard: dict[str, list[tuple[str, bytes]]] = {first: [], second: []}

        def listener(delivery: Delivery) -> None:
            heard[delivery.topic].append((delivery.key or "", delivery.body))

        bus.add_listener(first, listener)
        bus.add_listener(second, listener)
        publisher: EventPublisher = bus.publisher if isinstance(bus, KafkaBus) else bus
        assert isinstance(publisher, BatchPublisher) == isinstance(bus, KafkaBus | InProcessBus)
        if isinstance(bus, KafkaBus | InProcessBus):
            await bus.start()
        try:
            for round_ in range(ROUNDS):
                key = f"k{round_ % 4}"
                await publish_in_order(
                    publisher,
                    [
                        Outgoing(Note(n=3 * round_), first, key),
                        Outgoing(Note(n=3 * round_ + 1), second, key),
                        Outgoing(Note(n=3 * round_ + 2), first, key),
                    ],
                )

            def numbers(topic: str) -> dict[str, list[int]]:
                by_key: dict[str, list[int]] = {}
                for key, body in heard[topic]:
                    by_key.setdefault(key, []).append(Note.model_validate_json(body).n)
                return by_key

            async def count() -> int:
                return len(heard[first]) + len(heard[second])

            await eventually(count, lambda n: n == 3 * ROUNDS, what="every message")
            for key, ns in numbers(first).items():
                rounds = [r for r in range(ROUNDS) if f"k{r % 4}" == key]
                assert ns == [n for r in rounds for n in (3 * r, 3 * r + 2)]
            assert sorted(n for ns in numbers(second).values() for n in ns) == [
                3 * r + 1 for r in range(ROUNDS)
            ]
        finally:
            if isinstance(bus, KafkaBus | InProcessBus):
                await bus.stop()
