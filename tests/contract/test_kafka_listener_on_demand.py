"""A Kafka listener on demand (shared/kafka_listener.py, the gateway's): it fetches nothing until
it is wanted; from the return of ``want`` everything published is heard, and nothing published
while it was paused ever is; the last ``release`` pauses it again after the grace."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer

from shared.bus import Delivery, ensure_topics
from shared.kafka_listener import KafkaListener
from shared.kafka_security import client_options
from shared.settings import CommonSettings
from tests.eventually import eventually

pytestmark = pytest.mark.integration

GRACE_SECONDS = 0.2


@pytest.fixture
async def settings(kafka_bootstrap: str) -> CommonSettings:
    chosen = CommonSettings(
        kafka_bootstrap_servers=kafka_bootstrap,
        topic_prefix=f"on-demand-{uuid.uuid4().hex[:8]}.",
        topic_partitions=3,
    )
    await ensure_topics(chosen)
    return chosen


@pytest.fixture
async def producer(settings: CommonSettings) -> AsyncIterator[AIOKafkaProducer]:
    started = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await started.start()
    yield started
    await started.stop()


async def test_it_hears_only_while_wanted_and_from_the_wanting_on(
    settings: CommonSettings, producer: AIOKafkaProducer
) -> None:
    topic = settings.topics.activity
    heard: list[bytes] = []

    def hear(delivery: Delivery) -> None:
        heard.append(delivery.body)

    listener = KafkaListener(
        topic,
        hear,
        client=client_options(settings),
        client_id="on-demand-test",
        on_demand=True,
        release_grace_seconds=GRACE_SECONDS,
    )
    await listener.start()
    try:
        assert not listener.listening
        await producer.send_and_wait(topic, b"before anyone wanted it", key=b"k1")
        await listener.want()
        assert listener.listening
        await producer.send_and_wait(topic, b"while wanted", key=b"k2")

        async def got() -> list[bytes]:
            return list(heard)

        await eventually(got, lambda bodies: b"while wanted" in bodies, what="the wanted message")
        listener.release()

        async def listening() -> bool:
            return listener.listening

        await eventually(listening, lambda on: not on, what="the pause after the grace")
        await producer.send_and_wait(topic, b"while paused", key=b"k1")
        await listener.want()
        await producer.send_and_wait(topic, b"wanted again", key=b"k3")
        await eventually(got, lambda bodies: b"wanted again" in bodies, what="the second want")
        # Nothing of what was published while nobody wanted it: it starts at the ends again.
        assert heard == [b"while wanted", b"wanted again"]
    finally:
        await listener.stop()


async def test_a_want_within_the_grace_keeps_it_listening(
    settings: CommonSettings, producer: AIOKafkaProducer
) -> None:
    heard: list[bytes] = []
    listener = KafkaListener(
        settings.topics.activity,
        lambda delivery: heard.append(delivery.body),
        client=client_options(settings),
        client_id="on-demand-test",
        on_demand=True,
        release_grace_seconds=60,
    )
    await listener.start()
    try:
        await listener.want()
        listener.release()
        await listener.want()  # within the grace: no pause, no seek
        assert listener.listening
        await producer.send_and_wait(settings.topics.activity, b"kept", key=b"k")

        async def got() -> list[bytes]:
            return list(heard)

        await eventually(got, lambda bodies: bodies == [b"kept"], what="the message")
    finally:
        await listener.stop()
