"""Consumer lag measured from a real broker: end offsets against a group's committed offsets,
per partition, for a group that committed some and a group that never committed."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.structs import OffsetAndMetadata
from prometheus_client import REGISTRY

from shared.consumer_lag import ConsumerLag, lag_of

pytestmark = pytest.mark.integration


def test_lag_counts_from_the_commit_or_from_the_first_kept_message() -> None:
    assert lag_of(end=10, committed=4, beginning=0) == 6
    assert lag_of(end=10, committed=None, beginning=3) == 7
    assert lag_of(end=10, committed=-1, beginning=0) == 10
    assert lag_of(end=10, committed=10, beginning=0) == 0


async def test_lag_per_partition_of_each_group(kafka_bootstrap: str) -> None:
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"m{i}".encode(), partition=0)
        for i in range(3):
            await producer.send_and_wait(topic, f"n{i}".encode(), partition=1)
    finally:
        await producer.stop()
    committer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, group_id=f"{topic}-busy", enable_auto_commit=False
    )
    await committer.start()
    try:
        committer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        await committer.commit(
            {
                TopicPartition(topic, 0): OffsetAndMetadata(2, ""),
                TopicPartition(topic, 1): OffsetAndMetadata(3, ""),
            }
        )
    finally:
        await committer.stop()

    lag = ConsumerLag(
        {"bootstrap_servers": kafka_bootstrap},
        [(f"{topic}-busy", topic), (f"{topic}-idle", topic)],
        topic_label=lambda name: name.removeprefix("lag-"),
    )
    await lag.start()
    try:
        measured = await lag.refresh()
    finally:
        await lag.stop()
    assert measured == {
        (f"{topic}-busy", topic, 0): 3,
        (f"{topic}-busy", topic, 1): 0,
        (f"{topic}-idle", topic, 0): 5,
        (f"{topic}-idle", topic, 1): 3,
    }
    labels = {"group": f"{topic}-idle", "topic": topic.removeprefix("lag-"), "partition": "0"}
    assert REGISTRY.get_sample_value("interlock_consumer_lag", labels) == 5
