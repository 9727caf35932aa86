"""A service's Kafka: FastStream's broker publishes (the service's FastStream app runs it), one
keyed consumer per consumer group consumes every topic the group reads here
(``shared/kafka_consumer.py``: many messages at once, one execution's in order), and a
group-less consumer per listener broadcasts a topic to it (``shared/kafka_listener.py``).
``route`` subscribes on it as on the in-process bus."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.bus import DeliveryHandler, KafkaPublisher, Listener, create_broker
from shared.kafka_consumer import ConsumerOptions, KeyedKafkaConsumer
from shared.kafka_listener import KafkaListener
from shared.kafka_security import client_options
from shared.settings import CommonSettings

if TYPE_CHECKING:
    from shared.consumer_lag import ConsumerLag

MAX_POLL_INTERVAL_MS = 300_000
"""How long the group waits for a member's poll before it takes the member for dead. The fetch
loop polls at least every second, however long the handlers take, so this bounds only how long
a rebalance may wait for a member to let its partitions go (which is at most the rebalance
grace)."""


class KafkaBus:
    def __init__(self, settings: CommonSettings, client_id: str) -> None:
        self.broker = create_broker(settings, client_id)
        self.publisher = KafkaPublisher(self.broker)
        self._settings = settings
        self._client_id = client_id
        self._groups: dict[str, KeyedKafkaConsumer] = {}
        """One consumer per group, whatever the number of its topics: one group member per
        replica, so a replica's start is one join of its group (a member per topic made the
        orchestrator's six rejoin each other for 15 s at every start), with one fetch loop, one
        heartbeat and one commit loop."""
        self.listeners: list[KafkaListener] = []
        self._consuming = False
        """Between ``start_consumers`` and ``stop_consumers``."""

    def add_consumer(
        self,
        topic: str,
        group_id: str,
        consumer: DeliveryHandler,
        *,
        limit: int = 1,
        max_held: int | None = None,
    ) -> None:
        group = self._groups.get(group_id)
        if group is None:
            if self._consuming:
                raise RuntimeError("add consumers before the bus starts")
            group = self._groups[group_id] = KeyedKafkaConsumer(self._options(group_id))
        group.subscribe(topic, consumer, limit=limit, max_held=max_held or limit)

    def _options(self, group_id: str) -> ConsumerOptions:
        s = self._settings
        return ConsumerOptions(
            client=client_options(s),
            group_id=group_id,
            group_instance_id=s.kafka_group_instance_id,
            session_timeout_ms=s.kafka_session_timeout_ms,
            heartbeat_interval_ms=max(1_000, s.kafka_session_timeout_ms // 3),
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            graceful_timeout_seconds=s.graceful_timeout_seconds,
            rebalance_grace_seconds=s.rebalance_grace_seconds,
            client_id=self._client_id,
            commit_interval_seconds=s.consumer_commit_interval_ms / 1000,
        )

    @property
    def consumers(self) -> list[KeyedKafkaConsumer]:
        return list(self._groups.values())

    def held(self, group_id: str, topic: str) -> int:
        """Messages of ``topic`` the group's consumer holds (as the in-process bus's ``held``)."""
        return self._groups[group_id].held_of(topic)

    def add_listener(self, topic: str, listener: Listener) -> None:
        """Have ``listener`` hear every message of ``topic`` published once the bus has started
        its consumers (``start_consumers``), with no consumer group."""
        if self._consuming:
            # Started late, it would hear from some later point than its siblings: a listener
            # added on the fly has no use here yet, so it is refused as a mistake.
            raise RuntimeError("add listeners before the bus starts")
        self.listeners.append(
            KafkaListener(
                topic, listener, client=client_options(self._settings), client_id=self._client_id
            )
        )

    def subscriptions(self) -> list[tuple[str, str]]:
        """The (group, topic) pairs consumed here (for the lag gauge)."""
        return [(c.group_id, topic) for c in self.consumers for topic in c.topics]

    def lag_monitor(self) -> ConsumerLag:
        """The lag of this bus's groups, measured at the broker (``shared/consumer_lag.py``)."""
        # Imported here: shared.consumer_lag imports this module.
        from shared.consumer_lag import consumer_lag_of

        return consumer_lag_of(self, self._settings)

    async def start(self) -> None:
        """Start publishing and consuming (a process without a FastStream app: ``interlock
        dev --kafka``, tests)."""
        await self.broker.start()
        await self.start_consumers()

    async def stop(self) -> None:
        await self.stop_consumers()
        await self.broker.stop()

    async def start_consumers(self) -> None:
        """Start the listeners, then join the groups and start consuming (after the broker has
        started: the handlers publish). Listeners first: their positions are fixed before this
        process's handlers publish anything, so they hear all of it."""
        self._consuming = True
        for listener in self.listeners:
            await listener.start()
        for consumer in self.consumers:
            await consumer.start()

    async def stop_consumers(self) -> None:
        """Let what is in flight finish (up to the graceful timeout), commit, leave (before the
        broker stops: the last handlers still publish), then stop the listeners (last: they
        hear what those handlers publish)."""
        for consumer in self.consumers:
            await consumer.stop()
        for listener in self.listeners:
            await listener.stop()
        self._consuming = False
