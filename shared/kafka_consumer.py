"""One replica's member of a consumer group, reading every topic the group reads here, handling
many messages at once and those of one key (one execution) strictly in order: a ``KeyedWindow``
per topic decides, this does the I/O.

Why not FastStream's subscriber: FastStream 0.7 hands a subscriber one message at a time, and its
concurrent subscribers either commit before handling (``AckPolicy.ACK_FIRST``: a crash loses the
message) or run one worker per partition (``max_workers`` with manual commits: 12 partitions
would cap a sandbox at 12 runs, and a slow execution holds up every other of its partition).
Ordering by key within a partition needs the offsets committed below the lowest message still in
flight, which only a consumer that owns its commits can do; so this is aiokafka's consumer
directly, behind the same ``route`` (``docs/architecture.md``, "Concurrency").

- **Fetch loop.** ``getmany`` fills the windows up to their ``max_held`` messages (at most the
  smallest room of any, from the partitions of the topics with room). A full topic's partitions
  are left out: nothing more of them comes from the broker, since aiokafka requests a partition
  again only once the one batch it buffered of it (at most ``max_partition_fetch_bytes``) is
  taken. While every window is full the loop takes nothing; should they stay full for half the
  poll interval (long runs), the partitions are paused and polled, so that the group never
  takes the replica for dead. Pausing at every full window would cost more than it saves: aiokafka
  drops a paused partition's buffered batch and fetches it again on resume (measured: RSS from
  82 to 261 MB over a backlog of 100,000 messages, for a window that never held more than 128).
- **Tasks.** Each started message runs in a task of its own through the ``Consumer`` wrapper
  (decode, handle, dead-letter), retried in place while the wrapper asks for it (a failing
  dependency): the offset is not passed until it is done.
- **Commits.** A finished message may move its partition's commit point; one commit request is
  in flight at a time, at most one per commit interval, and carries the newest point of every
  partition, so commits coalesce: one request per interval under a steady load.
- **Rebalance.** A revoked partition stops starting messages at once; the listener waits up to
  the rebalance grace for its messages in flight (cancelling the rest: their next owner takes
  them up from their checkpoints), commits what they finished, and only then lets the partition
  go: one execution never runs on two replicas.
- **Stop.** The same for every partition, then the consumer closes (a static member keeps its
  partitions for its successor).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import CommitFailedError, IllegalStateError

from shared import metrics
from shared.bus import Delivery, DeliveryHandler
from shared.keyed_window import Held, KeyedWindow
from shared.waiting import wait_event

log = structlog.get_logger(__name__)

ROOM_CHECK_SECONDS = 1.0
"""While the window is full, the fetch loop looks this often whether it must poll for liveness
(the group coordinator takes a member that does not poll within ``max_poll_interval_ms`` for
dead), besides waking at once when a message finishes."""
FETCH_WAIT_MS = 500
"""The longest one ``getmany`` waits for new messages before the loop looks around again."""
COMMIT_RETRY_SECONDS = 1.0
CANCEL_WAIT_SECONDS = 5.0
"""How long a drain waits for the messages it cancelled to unwind. Bounded because a task can sit
in a driver call long after its cancellation (seen in the MongoDB driver, more than 30 s): an
unbounded wait held a rebalance, or a shutdown, for as long. What is still running then is
left to finish on its own; its message is not committed and is delivered again to the
partition's next reader, which the idempotency guards absorb as any redelivery."""


@dataclass(frozen=True)
class ConsumerOptions:
    """How one keyed consumer joins its group (``shared/bus.py`` fills it from the settings)."""

    client: dict[str, Any]
    """aiokafka client options: bootstrap servers and security."""
    group_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    graceful_timeout_seconds: float
    """On stop, how long the messages in flight get to finish."""
    rebalance_grace_seconds: float
    """On a rebalance, how long a revoked partition's messages in flight get to finish: the
    whole group waits meanwhile (aiokafka's rebalances are eager), so it is short."""
    client_id: str
    commit_interval_seconds: float = 0.0
    """The least time between two commits of the commit loop (stop and rebalance commit at
    once)."""


def delivery_of(record: ConsumerRecord[bytes, bytes]) -> Delivery:
    return Delivery(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key.decode(errors="replace") if record.key else None,
        body=record.value or b"",
        headers={k: v.decode(errors="replace") for k, v in record.headers or ()},
    )


def key_of(record: ConsumerRecord[bytes, bytes]) -> Hashable:
    # A keyless message (an outside producer's) has no order to keep: a key of its own.
    return record.key if record.key else (record.partition, record.offset)


class _Subscription:
    """One topic of a keyed consumer: its handler and its own window, which bounds and orders
    that topic's messages alone (one topic's backlog never takes another's room)."""

    def __init__(self, topic: str, handler: DeliveryHandler, *, limit: int, max_held: int):
        self.topic = topic
        self.handler = handler
        self.window: KeyedWindow[ConsumerRecord[bytes, bytes]] = KeyedWindow(
            limit=limit, max_held=max_held
        )
        self._in_flight_gauge = metrics.CONSUMER_IN_FLIGHT.labels(handler.name)
        self._held_gauge = metrics.CONSUMER_HELD.labels(handler.name)

    @property
    def room(self) -> int:
        return self.window.max_held - self.window.held

    def measure(self) -> None:
        self._in_flight_gauge.set(self.window.in_flight)
        self._held_gauge.set(self.window.held)


class KeyedKafkaConsumer:
    """One member of one consumer group, for every topic the group reads in this process
    (``subscribe`` each before ``start``)."""

    def __init__(self, options: ConsumerOptions) -> None:
        self.group_id = options.group_id
        self._options = options
        self._subscriptions: dict[str, _Subscription] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._assigned: set[TopicPartition] = set()
        self._leaving: set[TopicPartition] = set()
        """Assigned partitions being revoked: nothing more of theirs starts or is retried."""
        self._tasks: dict[asyncio.Task[None], Held[ConsumerRecord[bytes, bytes]]] = {}
        self._to_commit: dict[TopicPartition, int] = {}
        self._commit_wanted = asyncio.Event()
        self._room = asyncio.Event()
        """Set when a topic the fetch loop left out for a full window has room again."""
        self._full: set[str] = set()
        """The topics whose windows were full when the fetch loop last looked."""
        self._last_poll = 0.0
        """When ``getmany`` last returned (monotonic seconds)."""
        self._loops: list[asyncio.Task[None]] = []

    def subscribe(self, topic: str, handler: DeliveryHandler, *, limit: int, max_held: int) -> None:
        if self._consumer is not None:
            raise RuntimeError("subscribe before the consumer starts")
        if topic in self._subscriptions:
            raise ValueError(f"{topic} is consumed once per group")
        self._subscriptions[topic] = _Subscription(topic, handler, limit=limit, max_held=max_held)

    @property
    def topics(self) -> list[str]:
        return list(self._subscriptions)

    @property
    def in_flight(self) -> int:
        return sum(s.window.in_flight for s in self._subscriptions.values())

    @property
    def held(self) -> int:
        return sum(s.window.held for s in self._subscriptions.values())

    def held_of(self, topic: str) -> int:
        return self._subscriptions[topic].window.held

    async def start(self) -> None:
        o = self._options
        consumer = AIOKafkaConsumer(
            **o.client,
            group_id=o.group_id,
            group_instance_id=o.group_instance_id,
            client_id=o.client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=o.session_timeout_ms,
            heartbeat_interval_ms=o.heartbeat_interval_ms,
            max_poll_interval_ms=o.max_poll_interval_ms,
        )
        consumer.subscribe(self.topics, listener=_Rebalance(self))
        await consumer.start()
        self._consumer = consumer
        self._last_poll = time.monotonic()
        topics = ", ".join(self.topics)
        self._loops = [
            asyncio.create_task(self._fetch_loop(), name=f"fetch {topics}"),
            asyncio.create_task(self._commit_loop(), name=f"commit {topics}"),
        ]

    async def stop(self) -> None:
        """Stop fetching, let the messages in flight finish (up to the graceful timeout; the rest
        are cancelled and delivered again to whoever reads the partition next), commit, close."""
        consumer = self._consumer
        if consumer is None:
            return
        fetch, commit = self._loops
        fetch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fetch
        self._leaving |= self._assigned
        await self._drain(set(self._assigned), self._options.graceful_timeout_seconds)
        commit.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await commit
        await self._commit_now()
        self._consumer = None
        await consumer.stop()

    async def abort(self) -> None:
        """Stop at once, as a process that dies does: what is in flight is cancelled and nothing
        more is committed (the bus contract tests crash a consumer with this)."""
        consumer = self._consumer
        if consumer is None:
            return
        self._consumer = None
        for task in [*self._loops, *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._loops, *self._tasks, return_exceptions=True)
        self._to_commit.clear()
        await consumer.stop()

    # -- fetching -------------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        while True:
            try:
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the client reconnects by itself; don't spin meanwhile
                log.warning("consumer.fetch_failed", group=self.group_id, error=repr(exc))
                await asyncio.sleep(COMMIT_RETRY_SECONDS)

    async def _fetch_once(self) -> None:
        subscriptions = self._subscriptions.values()
        self._full = {s.topic for s in subscriptions if s.window.full}
        self._room.clear()
        open_topics = [s for s in subscriptions if s.topic not in self._full]
        # Only the partitions of topics with room (none named: all of them). A full topic's
        # partitions are left out, not paused: aiokafka keeps the one batch it buffered of each
        # and fetches them no further until it is taken.
        partitions = (
            () if not self._full else tuple(p for p in self._assigned if p.topic not in self._full)
        )
        if not open_topics or (self._full and not partitions):
            if time.monotonic() - self._last_poll >= self._options.max_poll_interval_ms / 2000:
                # Full for long: say "alive" to the group. Paused partitions return nothing,
                # but one assigned meanwhile may: what is returned is taken, never dropped (its
                # position has moved).
                self._pause()
                self._take(await self._poll(timeout_ms=0))
            await wait_event(self._room, ROOM_CHECK_SECONDS)
            return
        self._resume()
        room = min(s.room for s in open_topics)
        if not self._full:
            self._take(await self._poll(partitions, timeout_ms=FETCH_WAIT_MS, max_records=room))
            return
        # Some topic is full: a message of it that finishes must not wait for this fetch's
        # timeout to be read again, so the fetch gives way to its room.
        fetch = asyncio.create_task(
            self._poll(partitions, timeout_ms=FETCH_WAIT_MS, max_records=room)
        )
        room_back = asyncio.create_task(self._room.wait())
        try:
            await asyncio.wait((fetch, room_back), return_when=asyncio.FIRST_COMPLETED)
        finally:
            room_back.cancel()
            if not fetch.done():
                fetch.cancel()  # nothing taken: what it waited for stays in aiokafka's buffer
            await asyncio.gather(fetch, room_back, return_exceptions=True)
        if not fetch.cancelled():
            self._take(fetch.result())

    async def _poll(
        self,
        partitions: tuple[TopicPartition, ...] = (),
        *,
        timeout_ms: int,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        batch: dict[
            TopicPartition, list[ConsumerRecord[bytes, bytes]]
        ] = await self._kafka().getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        self._last_poll = time.monotonic()
        return batch

    def _take(self, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> None:
        for partition, records in batch.items():
            if partition not in self._assigned or partition in self._leaving:
                continue  # revoked while the fetch was out: its next owner reads them
            subscription = self._subscriptions[partition.topic]
            for record in records:
                subscription.window.offer(Held(partition, record.offset, key_of(record), record))
            self._start_ready(subscription)

    def _pause(self) -> None:
        consumer = self._kafka()
        if self._assigned - consumer.paused():
            consumer.pause(*self._assigned)

    def _resume(self) -> None:
        consumer = self._kafka()
        paused = consumer.paused()
        if paused:
            consumer.resume(*paused)

    # -- handling -------------------------------------------------------------------------

    def _start_ready(self, subscription: _Subscription) -> None:
        for held in subscription.window.start():
            task = asyncio.create_task(self._handle(subscription.handler, held))
            self._tasks[task] = held
            task.add_done_callback(self._finished)
        subscription.measure()

    async def _handle(
        self, handler: DeliveryHandler, held: Held[ConsumerRecord[bytes, bytes]]
    ) -> None:
        delivery = delivery_of(held.item)
        while True:
            try:
                await handler.deliver(delivery)
                return
            except Exception:
                # The wrapper has logged, counted and paused already; it raises only for what
                # may succeed later (a dependency down), so the message is handled again here,
                # as Kafka would redeliver it, unless its partition has gone elsewhere.
                if held.partition in self._leaving or held.partition not in self._assigned:
                    raise

    def _finished(self, task: asyncio.Task[None]) -> None:
        held = self._tasks.pop(task)
        subscription = self._subscriptions[held.item.topic]
        window = subscription.window
        if task.cancelled() or task.exception() is not None:
            window.abandon(held)
        else:
            point = window.finish(held)
            if point is not None:
                self._to_commit[held.partition] = point
                self._commit_wanted.set()
        if subscription.topic in self._full and not window.full:
            self._room.set()
        if self._consumer is not None and not self._loops[0].done():
            self._start_ready(subscription)
        else:
            subscription.measure()

    async def _drain(self, partitions: set[TopicPartition], timeout: float) -> None:
        """Wait for the messages of ``partitions`` in flight, up to ``timeout`` seconds, then
        cancel what is left (not committed: delivered again)."""
        for partition in partitions:
            self._subscriptions[partition.topic].window.drop_waiting(partition)
        tasks = [t for t, held in self._tasks.items() if held.partition in partitions]
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            log.warning("consumer.cancelled_in_flight", group=self.group_id, messages=len(late))
            _, unwinding = await asyncio.wait(late, timeout=CANCEL_WAIT_SECONDS)
            if unwinding:
                log.warning("consumer.cancel_ignored", group=self.group_id, messages=len(unwinding))

    # -- committing -----------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await self._commit_wanted.wait()
            await self._commit_now()
            # What finishes meanwhile rides on the next commit.
            await asyncio.sleep(self._options.commit_interval_seconds)

    async def _commit_now(self) -> None:
        self._commit_wanted.clear()
        offsets, self._to_commit = self._to_commit, {}
        offsets = {p: o for p, o in offsets.items() if p in self._assigned}
        if not offsets or self._consumer is None:
            return
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # The group moved on (a rebalance): those partitions are someone else's now, and
            # what they finished is delivered again there, absorbed by the idempotency guards.
            log.warning("consumer.commit_dropped", group=self.group_id, error=repr(exc))
        except Exception as exc:  # the broker or the coordinator away: try again shortly
            log.warning("consumer.commit_failed", group=self.group_id, error=repr(exc))
            for partition, offset in offsets.items():  # keep the newest point of each
                self._to_commit[partition] = max(offset, self._to_commit.get(partition, 0))
            await asyncio.sleep(COMMIT_RETRY_SECONDS)
            self._commit_wanted.set()

    def _kafka(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the consumer is not started")
        return self._consumer

    # -- rebalancing (called by aiokafka's coordinator, which awaits them) -----------------

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        mine = partitions & self._assigned
        self._leaving |= mine
        try:
            await self._drain(mine, self._options.rebalance_grace_seconds)
            await self._commit_now()  # still ours until this returns
        finally:
            for partition in mine:
                self._assigned.discard(partition)
                self._leaving.discard(partition)
                self._subscriptions[partition.topic].window.forget(partition)

    def assigned(self, partitions: set[TopicPartition]) -> None:
        self._assigned |= partitions
        self._room.set()  # a full topic's wait looks again: its new partitions may have room


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: KeyedKafkaConsumer) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._owner.revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._owner.assigned(set(assigned))
