"""Consumer lag per partition: how far each of a service's consumer groups trails its topics.

Measured from the broker (end offsets against the group's committed offsets), not from the
consumer's own fetch position: a stuck or crashed consumer stops reporting what it sees, while
the broker still knows what it has not committed. Each replica of a service measures the same
groups, so the series agree across replicas (``max`` them); a partition that moved to another
replica is still measured here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from shared import metrics
from shared.kafka_bus import KafkaBus
from shared.kafka_security import client_options
from shared.settings import CommonSettings

log = structlog.get_logger(__name__)

Subscription = tuple[str, str]
"""(consumer group, topic)."""


def lag_of(end: int, committed: int | None, beginning: int) -> int:
    """Messages not yet committed. A group that never committed on a partition reads it from
    its beginning (``auto_offset_reset=earliest``)."""
    start = committed if committed is not None and committed >= 0 else beginning
    return max(0, end - start)


class ConsumerLag:
    def __init__(
        self,
        client: dict[str, Any],
        subscriptions: Iterable[Subscription],
        *,
        topic_label: Callable[[str], str] = lambda topic: topic,
    ) -> None:
        self._client = client
        """aiokafka's connection options (``shared/kafka_security.py``)."""
        self._subscriptions = sorted(set(subscriptions))
        self._label = topic_label
        self._admin: AIOKafkaAdminClient | None = None
        self._offsets: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        admin = AIOKafkaAdminClient(**self._client)
        # No group: it only asks for the partitions' first and end offsets.
        offsets = AIOKafkaConsumer(**self._client, group_id=None, enable_auto_commit=False)
        try:
            await admin.start()
            await offsets.start()
        except BaseException:
            await offsets.stop()
            await admin.close()
            raise
        self._admin, self._offsets = admin, offsets

    async def stop(self) -> None:
        admin, offsets = self._admin, self._offsets
        self._admin = self._offsets = None
        if offsets is not None:
            await offsets.stop()
        if admin is not None:
            await admin.close()

    async def refresh(self) -> dict[tuple[str, str, int], int]:
        """Measure every subscription once; set the gauge and return what was set."""
        assert self._admin is not None and self._offsets is not None, "start() first"
        # Described on every refresh: partitions added since start count too.
        described = await self._admin.describe_topics(
            sorted({topic for _, topic in self._subscriptions})
        )
        partitions = {
            d["topic"]: sorted(
                (TopicPartition(d["topic"], p["partition"]) for p in d["partitions"]),
                key=lambda tp: tp.partition,
            )
            for d in described
            if d["error_code"] == 0
        }
        every = [tp for tps in partitions.values() for tp in tps]
        if not every:
            return {}
        ends = await self._offsets.end_offsets(every)
        beginnings = await self._offsets.beginning_offsets(every)
        measured: dict[tuple[str, str, int], int] = {}
        for group, topic in self._subscriptions:
            if topic not in partitions:
                continue  # not created yet
            committed = await self._admin.list_consumer_group_offsets(
                group, partitions=partitions[topic]
            )
            for tp in partitions[topic]:
                found = committed.get(tp)
                lag = lag_of(ends[tp], found.offset if found else None, beginnings[tp])
                metrics.CONSUMER_LAG.labels(group, self._label(topic), str(tp.partition)).set(lag)
                measured[(group, topic, tp.partition)] = lag
        return measured

    async def run_forever(self, poll_seconds: float) -> None:
        """Measure every ``poll_seconds`` until cancelled; a broker that is down only delays
        the next measurement (the gauge keeps its last value meanwhile)."""
        try:
            while True:
                try:
                    if self._admin is None:
                        await self.start()
                    await self.refresh()
                except Exception:
                    log.warning("consumer_lag.refresh_failed", exc_info=True)
                    await self.stop()
                await asyncio.sleep(poll_seconds)
        finally:
            await self.stop()


def consumer_lag_of(bus: KafkaBus, settings: CommonSettings) -> ConsumerLag:
    """The lag of the groups ``bus``'s consumers consume in, labelled by base topic name."""
    return ConsumerLag(
        client_options(settings),
        bus.subscriptions(),
        topic_label=lambda topic: topic.removeprefix(settings.topics.prefix),
    )
