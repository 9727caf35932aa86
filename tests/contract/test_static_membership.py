"""Static group membership on a real broker (``INTERLOCK_KAFKA_GROUP_INSTANCE_ID``): each
subscription joins under its own instance name, and a replica that stops without leaving and
comes back under the same name is served its partitions again long before the session timeout,
with the other replica still a member (not replaced by a newcomer)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from faststream.kafka import KafkaBroker

from shared.bus import ensure_topics, route
from shared.events import AgentInput, ExecutionRequested, encode_event
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.eventually import eventually

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 60_000
"""Long, so that anything served within the test's waits was not waiting for it to expire."""
WAIT_SECONDS = 25


def settings_for(bootstrap: str, run: str, instance: str | None) -> CommonSettings:
    return CommonSettings(
        kafka_bootstrap_servers=bootstrap,
        topic_prefix=f"static-{run}.",
        consumer_group_prefix=f"static-{run}",
        topic_partitions=2,
        kafka_session_timeout_ms=SESSION_TIMEOUT_MS,
        kafka_group_instance_id=instance,
    )


@asynccontextmanager
async def replica(settings: CommonSettings, handled: list[str]) -> AsyncIterator[KafkaBroker]:
    bus = KafkaBus(settings, "static-membership")

    async def handle(event: ExecutionRequested) -> None:
        handled.append(event.execution_id)

    route(
        bus,
        settings,
        bus.publisher,
        service="static",
        topic=settings.topics.requested,
        model=ExecutionRequested,
        handle=handle,
    )
    await bus.start()
    try:
        yield bus.broker
    finally:
        await bus.stop()


async def members(bootstrap: str, group: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    [(_, _, _, _, _, group_members, *_)] = response.groups
    return sorted(member[0] for member in group_members)


async def publish_to_every_partition(broker: KafkaBroker, topic: str, tag: str) -> set[str]:
    ids = {f"{tag}-{partition}" for partition in (0, 1)}
    for partition, execution_id in enumerate(sorted(ids)):
        event = ExecutionRequested(
            execution_id=execution_id,
            project_id="p",
            workspace_id="w",
            agent="refund-approval",
            input=AgentInput(message="hi"),
        )
        await broker.publish(
            encode_event(event),
            topic=topic,
            partition=partition,
            headers={"content-type": "application/json", "event-type": event.type},
        )
    return ids


def test_each_subscription_gets_a_name_of_its_own() -> None:
    settings = CommonSettings(kafka_group_instance_id="sandbox-7f9c")
    assert settings.group_instance_id("interlock.execution.requested") == (
        "sandbox-7f9c.interlock.execution.requested"
    )
    assert CommonSettings().group_instance_id("interlock.execution.requested") is None


async def test_a_replica_restarted_under_its_name_gets_its_partitions_back(
    kafka_bootstrap: str,
) -> None:
    run = uuid.uuid4().hex[:8]
    first = settings_for(kafka_bootstrap, run, "replica-a")
    second = settings_for(kafka_bootstrap, run, "replica-b")
    await ensure_topics(first)
    topic = first.topics.requested
    group = first.consumer_group("static")
    handled: list[str] = []

    async def everything_handled(expected: set[str]) -> None:
        async def seen() -> set[str]:
            return set(handled)

        await eventually(seen, expected.issubset, timeout=WAIT_SECONDS, what=str(expected))

    async with replica(second, handled) as b:
        async with replica(first, handled):
            ids = await publish_to_every_partition(b, topic, "before")
            await everything_handled(ids)
            before = await members(kafka_bootstrap, group)
            # The broker names a static member after its instance: both joined under theirs.
            assert [m.split(f".{topic}-")[0] for m in before] == ["replica-a", "replica-b"]
        # replica-a stopped without leaving the group (a static member never leaves); its
        # partition is served again only once it is back, well within the session timeout.
        async with replica(first, handled):
            ids = await publish_to_every_partition(b, topic, "after")
            await everything_handled(ids)
            after = await members(kafka_bootstrap, group)
        assert len(after) == 2
        assert [m for m in after if m.startswith("replica-b.")] == [
            m for m in before if m.startswith("replica-b.")
        ]
