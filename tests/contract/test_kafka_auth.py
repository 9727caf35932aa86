"""The Kafka clients authenticate with the SASL settings against a real broker's SASL listener
(infra/infra.sh starts one with PLAIN; the mechanisms map alike, see test_kafka_security.py):
topics are created, a service's broker publishes, the lag gauge reads offsets, and a wrong
password is refused rather than ignored."""

from __future__ import annotations

import os
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from shared.bus import KafkaPublisher, create_broker, ensure_topics
from shared.consumer_lag import ConsumerLag
from shared.events import ExecutionRequested
from shared.kafka_security import client_options
from shared.settings import CommonSettings

pytestmark = pytest.mark.integration

SERVERS = "INTERLOCK_TEST_KAFKA_SASL_SERVERS"


def sasl_settings(password: str | None = None) -> CommonSettings:
    servers = os.environ.get(SERVERS)
    if not servers:
        pytest.skip(f"no SASL listener: {SERVERS} is unset (infra/infra.sh exports it)")
    return CommonSettings(
        kafka_bootstrap_servers=servers,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism="PLAIN",
        kafka_sasl_username=os.environ["INTERLOCK_TEST_KAFKA_SASL_USER"],
        kafka_sasl_password=password or os.environ["INTERLOCK_TEST_KAFKA_SASL_PASSWORD"],
        topic_prefix=f"sasl-{uuid.uuid4().hex[:8]}.",
        topic_partitions=1,
    )


async def test_every_kafka_client_authenticates_with_the_settings() -> None:
    settings = sasl_settings()
    created = await ensure_topics(settings)
    assert settings.topics.requested in created

    broker = create_broker(settings, "sasl-test")
    await broker.start()
    try:
        event = ExecutionRequested(
            execution_id="e-sasl",
            project_id="p",
            workspace_id="w",
            agent="a",
            input={"message": "hi"},
        )
        await KafkaPublisher(broker).publish(event, settings.topics.requested, key="e-sasl")
    finally:
        await broker.stop()

    reader = AIOKafkaConsumer(
        settings.topics.requested,
        **client_options(settings),
        group_id=f"{settings.topic_prefix}readers",
        auto_offset_reset="earliest",
    )
    await reader.start()
    try:
        message = await reader.getone()
        assert ExecutionRequested.model_validate_json(message.value).execution_id == "e-sasl"
        await reader.commit()
    finally:
        await reader.stop()

    lag = ConsumerLag(
        client_options(settings),
        [(f"{settings.topic_prefix}readers", settings.topics.requested)],
    )
    await lag.start()
    try:
        assert await lag.refresh() == {
            (f"{settings.topic_prefix}readers", settings.topics.requested, 0): 0
        }
    finally:
        await lag.stop()


async def test_a_wrong_password_is_refused() -> None:
    settings = sasl_settings(password="not-the-password")
    with pytest.raises(KafkaError):
        await ensure_topics(settings)
