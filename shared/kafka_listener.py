"""One broadcast listener of one Kafka topic (``shared/bus.py``, ``ListenerHost``): it hears every
message of every partition published after ``start()`` returned, in order within a partition
(so per key), with no consumer group, no commits and no redelivery.

Why aiokafka's consumer without a group: with ``group_id=None`` it uses its
``NoGroupCoordinator``, which assigns every partition of the subscribed topic to this one
consumer (and assigns a partition added later, on the next metadata refresh), so each process
hears everything, where members of one group would share the partitions. No offsets are
committed, and ``auto_offset_reset="latest"`` starts each partition at its end.

``start()`` returns only once the position of every partition is fixed (the end offset the
broker reported): what is published after it returns has an offset at or past that position,
so it is heard. The gateway relies on this: it starts listening, then reads the store, and
whatever happens in between is heard rather than lost.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from shared.bus import Delivery, Listener
from shared.kafka_consumer import delivery_of

log = structlog.get_logger(__name__)

FETCH_WAIT_MS = 1_000
"""The longest one ``getmany`` waits for new messages; a message arriving meanwhile ends the
wait at once, so this bounds only how long an idle loop sleeps between two polls."""
FETCH_RETRY_SECONDS = 1.0
"""Pause after a failed fetch: the client reconnects by itself, the loop must not spin
meanwhile."""
# aiokafka's fetch defaults (answer as soon as one message is there, else after 500 ms), on
# purpose: a stream's latency at low load comes first. Measured trade-off: waiting up to 50 ms
# for 32 KiB saved 7% of the gateway's busy time at saturation (each fetch encodes a request
# over every partition) but made an idle gateway fetch 20 times a second (0.6% -> 1.7% of a
# core). Listening on demand (``want`` / ``release``) is better than either: nothing is fetched
# while nobody needs it.
RELEASE_GRACE_SECONDS = 30.0
"""An on-demand listener keeps fetching this long after its last user let go: streams come and
go, and each resume costs a round of ListOffsets requests."""
START_TIMEOUT_SECONDS = 30.0
"""How long ``start()`` waits for the partitions' end offsets before it gives up (a broker that
answered the bootstrap and went away): better to fail the start than to hang it."""
STOP_TIMEOUT_SECONDS = 10.0
"""How long ``stop()`` waits for the client to close; a stop must never hang a shutdown."""


class KafkaListener:
    """With ``on_demand``, nothing is fetched until ``want`` is awaited, and fetching stops again
    ``RELEASE_GRACE_SECONDS`` after the last ``release``: a gateway with no stream open pays
    nothing for the topic. ``want`` returns once every partition's position is fixed at its end,
    so what is published after it returns is heard, as after ``start`` without ``on_demand``."""

    def __init__(
        self,
        topic: str,
        listener: Listener,
        *,
        client: dict[str, Any],
        client_id: str,
        on_demand: bool = False,
        release_grace_seconds: float = RELEASE_GRACE_SECONDS,
    ) -> None:
        self.topic = topic
        self._listener = listener
        self._client = client
        self._client_id = client_id
        self._on_demand = on_demand
        self._release_grace = release_grace_seconds
        self._consumer: AIOKafkaConsumer | None = None
        self._loop: asyncio.Task[None] | None = None
        self._users = 0
        self._listening = not on_demand
        self._resuming: asyncio.Future[None] | None = None
        self._pausing: asyncio.TimerHandle | None = None

    @property
    def listening(self) -> bool:
        """Fetching (positions fixed at or after the last ``want``)."""
        return self._listening

    async def want(self) -> None:
        """One more user: from the return on, what is published is heard."""
        self._users += 1
        if self._pausing is not None:
            self._pausing.cancel()
            self._pausing = None
        if self._listening:
            return
        if self._resuming is None:
            self._resuming = asyncio.ensure_future(self._resume())
        resuming = self._resuming
        try:
            # Shielded: a user that leaves while it waits must not cancel the others' resume.
            await asyncio.shield(resuming)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """One user fewer; the last one's leaving pauses fetching after the grace."""
        self._users = max(0, self._users - 1)
        if self._users or not self._on_demand or self._pausing is not None:
            return
        self._pausing = asyncio.get_running_loop().call_later(self._release_grace, self._pause)

    def _pause(self) -> None:
        self._pausing = None
        consumer = self._consumer
        if self._users or consumer is None or self._resuming is not None:
            return
        consumer.pause(*consumer.assignment())
        self._listening = False

    async def _resume(self) -> None:
        consumer = self._kafka()
        try:
            partitions = consumer.assignment()
            # What was published while paused is nobody's: start at the ends again, and wait
            # until every position is fixed there.
            async with asyncio.timeout(START_TIMEOUT_SECONDS):
                await self._fix_positions(consumer)
            consumer.resume(*partitions)
            self._listening = True
        finally:
            self._resuming = None

    def _kafka(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError(f"the listener of {self.topic!r} is not started")
        return self._consumer

    async def start(self) -> None:
        """Connect, take every partition of the topic and fix each one's position at its end;
        from the return on, every message published to the topic is heard."""
        if self._consumer is not None:
            raise RuntimeError(f"the listener of {self.topic!r} is started already")
        consumer = AIOKafkaConsumer(
            **self._client,
            group_id=None,
            client_id=self._client_id,
            enable_auto_commit=False,
            auto_offset_reset="latest",
        )
        # Subscribed before start: ``start`` then assigns every partition itself (and raises if
        # the topic does not exist), so the assignment is there when it returns.
        consumer.subscribe([self.topic])
        try:
            await consumer.start()
            if self._on_demand:
                consumer.pause(*consumer.assignment())
            else:
                async with asyncio.timeout(START_TIMEOUT_SECONDS):
                    await self._fix_positions(consumer)
        except BaseException:
            await consumer.stop()  # whatever it opened before it failed
            raise
        self._consumer = consumer
        # A context of its own: the listener does not inherit the log bindings or the span of
        # whoever started the bus, as on a message heard in another process.
        self._loop = asyncio.create_task(
            self._listen(consumer), name=f"listen {self.topic}", context=contextvars.Context()
        )

    async def _fix_positions(self, consumer: AIOKafkaConsumer) -> None:
        partitions: set[TopicPartition] = consumer.assignment()
        if not partitions:
            raise RuntimeError(f"no partitions of {self.topic!r} assigned to its listener")
        # The ends asked for now (one ListOffsets request per broker, retried while a new
        # topic's leaders are being elected), then each position set to its end: the first
        # message fetched is the one at that offset. Not ``seek_to_end``: that asks the fetcher
        # for a reset, and a reset still in flight from before (the one ``start`` began, slow
        # while leaders are elected) can land after it and set the older, lower offset, so
        # what was published while nobody listened would be heard (seen on a new topic).
        # ``seek`` ends any reset: a late one is then ignored.
        ends = await consumer.end_offsets(list(partitions))
        for partition, offset in ends.items():
            consumer.seek(partition, offset)

    async def stop(self) -> None:
        """Stop hearing and close the client; returns within ``STOP_TIMEOUT_SECONDS``."""
        consumer, loop = self._consumer, self._loop
        self._consumer = self._loop = None
        if self._pausing is not None:
            self._pausing.cancel()
            self._pausing = None
        if consumer is None:
            return
        try:
            async with asyncio.timeout(STOP_TIMEOUT_SECONDS):
                if loop is not None:
                    loop.cancel()
                    # ``wait``, not ``await loop``: a cancellation of this stop itself still
                    # propagates, where suppressing the loop's CancelledError would eat it.
                    await asyncio.wait([loop])
                await consumer.stop()
        except TimeoutError:
            log.warning("listener.stop_timed_out", topic=self.topic)

    async def _listen(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            try:
                batch = await consumer.getmany(timeout_ms=FETCH_WAIT_MS)
            except Exception as exc:
                # A broker away (aiokafka reconnects by itself) or anything else: a listener that
                # died silently would leave its views frozen, so log, pause and poll again.
                log.warning("listener.fetch_failed", topic=self.topic, error=repr(exc))
                await asyncio.sleep(FETCH_RETRY_SECONDS)
                continue
            # One partition's records are in offset order, and one key is in one partition.
            for records in batch.values():
                for record in records:
                    self._hear(delivery_of(record))

    def _hear(self, delivery: Delivery) -> None:
        try:
            self._listener(delivery)
        except Exception:
            # Nothing to redeliver to: the message is gone for this listener, the next one is not.
            log.exception(
                "listener.failed",
                topic=delivery.topic,
                partition=delivery.partition,
                offset=delivery.offset,
            )
