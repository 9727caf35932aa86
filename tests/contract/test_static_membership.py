"""Static group membership on a real broker (``INTERLOCK_KAFKA_GROUP_INSTANCE_ID``): a replica
joins its service's group once, under its instance name, for all its topics; and a replica that
stops without leaving and comes back under the same name is served its partitions again long
before the session timeout, with the other replica still a member (not replaced by a
newcomer)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from faststream.kafka import KafkaBroker

from shared.bus import ensure_topics, route
from shared.events import (
    AgentInput,
    CancelRequested,
    EventModel,
    ExecutionRequested,
    encode_event,
)
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.eventually import eventually

pytestmark = pytest.mark.integration

Event = TypeVar("Event", bound=EventModel)

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


def instance_of(member_id: str) -> str:
    """The instance name a static member joined under: the broker names it ``<name>-<uuid>``."""
    return member_id[: -len("-00000000-0000-0000-0000-000000000000")]


async def test_a_replica_reads_all_its_topics_as_one_member_under_its_name(
    kafka_bootstrap: str,
) -> None:
    """One member per replica, whatever the number of its service's topics: a start is one
    join, and each topic keeps its own handler."""
    run = uuid.uuid4().hex[:8]
    settings = settings_for(kafka_bootstrap, run, "replica-a")
    await ensure_topics(settings)
    topics = settings.topics
    bus = KafkaBus(settings, "static-membership")
    heard: list[tuple[str, str]] = []

    def hear(topic: str, model: type[Event]) -> None:
        async def handle(event: Event) -> None:
            heard.append((topic, event.execution_id))

        route(
            bus, settings, bus.publisher, service="static", topic=topic, model=model, handle=handle
        )

    hear(topics.requested, ExecutionRequested)
    hear(topics.cancellations, CancelRequested)
    await bus.start()
    try:
        assert len(bus.consumers) == 1
        assert bus.subscriptions() == [
            (settings.consumer_group("static"), topics.requested),
            (settings.consumer_group("static"), topics.cancellations),
        ]
        await publish_to_every_partition(bus.broker, topics.requested, "req")
        cancel = CancelRequested(execution_id="req-0", project_id="p", workspace_id="w")
        await bus.broker.publish(
            encode_event(cancel),
            topic=topics.cancellations,
            key=b"req-0",
            headers={"content-type": "application/json", "event-type": cancel.type},
        )

        async def seen() -> set[tuple[str, str]]:
            return set(heard)

        expected = {
            (topics.requested, "req-0"),
            (topics.requested, "req-1"),
            (topics.cancellations, "req-0"),
        }
        await eventually(seen, expected.__eq__, timeout=WAIT_SECONDS, what=str(expected))
        group_members = await members(kafka_bootstrap, settings.consumer_group("static"))
        assert [instance_of(m) for m in group_members] == ["replica-a"]
    finally:
        await bus.stop()


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
            assert [instance_of(m) for m in before] == ["replica-a", "replica-b"]
        # replica-a stopped without leaving the group (a static member never leaves); its
        # partition is served again only once it is back, well within the session timeout.
        async with replica(first, handled):
            ids = await publish_to_every_partition(b, topic, "after")
            await everything_handled(ids)
            after = await members(kafka_bootstrap, group)
        assert len(after) == 2
        assert [m for m in after if instance_of(m) == "replica-b"] == [
            m for m in before if instance_of(m) == "replica-b"
        ]
