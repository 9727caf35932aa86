"""The consuming half of the in-process bus (``shared/inprocess_bus.py``, whose docstring states
the delivery rules): one pump per (consumer group, topic) reads the bus's log into a keyed
window, runs what the window lets start, and commits below the oldest message not finished.
Internal to that bus."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import dataclass
from typing import Protocol

import structlog

from shared.bus import RETRY_DELAY_SECONDS, Delivery, DeliveryHandler
from shared.keyed_window import Held, KeyedWindow
from shared.waiting import wait_event

log = structlog.get_logger(__name__)

BATCH = 100
"""Rows a pump reads at once at most (fewer when its window has less room)."""
IDLE_WAKE_SECONDS = 1.0
"""A pump with nothing to do looks again this often even without a wake-up (belt and braces)."""


class Log(Protocol):
    """What a pump uses of its bus: the bus's own methods (``InProcessBus``), private to it."""

    async def _committed(self, group_id: str, topic: str) -> int: ...

    async def _commit(self, group_id: str, topic: str, offset: int) -> None: ...

    async def _rows_above(self, topic: str, offset: int, count: int) -> list[Delivery]: ...

    async def _maybe_prune(self) -> None: ...


@dataclass(frozen=True)
class Subscription:
    """A consumer group's consumer of one topic, and how many of its messages it may take on."""

    topic: str
    group_id: str
    consumer: DeliveryHandler
    limit: int
    max_held: int


class Pump:
    """One consumer group reading one topic: reads the log into a keyed window, runs what the
    window lets start as tasks, and commits below the oldest message not finished."""

    def __init__(self, bus: Log, subscription: Subscription) -> None:
        self._bus = bus
        self._topic = subscription.topic
        self._group_id = subscription.group_id
        self._consumer = subscription.consumer
        self.window: KeyedWindow[Delivery] = KeyedWindow(
            limit=subscription.limit, max_held=subscription.max_held
        )
        self.wake = asyncio.Event()
        """Set by a publish to the topic, and by a finish that makes room in a full window."""
        self._fetched = 0
        """The highest id read into the window: the next read is above it, not above the
        committed offset (what is held is not read twice)."""
        self._handlers: set[asyncio.Task[None]] = set()
        self._to_commit = 0
        """The highest id below which (and at which) everything is finished."""
        self._committed = 0
        """The highest id written as committed."""
        self._committer: asyncio.Task[None] | None = None
        self._context = contextvars.copy_context()
        """Where handlers run (a copy each): the pump's own, never the context of whoever
        published a message the pump took from it (its log bindings and span are not the
        handler's, as on a message heard in another process)."""
        self._caught_up = False
        """Everything stored on the topic up to ``_fetched`` is in the window or done, and every
        message published since was handed over (``published``): the next one may be taken as
        it is published, without reading it back from the file."""

    async def run(self) -> None:
        self._context = contextvars.copy_context()
        committed = await self._bus._committed(self._group_id, self._topic)
        self._fetched = self._to_commit = self._committed = committed
        try:
            while True:
                self.wake.clear()
                if self.window.full:
                    await self._sleep()  # back-pressure: a finish makes room and wakes us
                    continue
                room = min(BATCH, self.window.max_held - self.window.held)
                self._caught_up = False  # a publish while this read waits is read next time
                deliveries = await self._bus._rows_above(self._topic, self._fetched, room)
                for delivery in deliveries:
                    self._offer(delivery)
                self._start_ready()
                if len(deliveries) == room:
                    continue  # there may be more: read on while the window has room
                # Caught up: only a publish brings more (a finish does not, the window has room),
                # and a publish hands it over while the window has room.
                self._caught_up = not self.wake.is_set()
                await self._bus._maybe_prune()
                await self._sleep()
        finally:
            await self._abandon_in_flight()

    def published(self, delivery: Delivery) -> None:
        """``delivery`` was just stored on the topic (the bus calls this in offset order, before
        anything else runs). Taken into the window at once if the pump has read everything
        before it and has room for it: the message is on disk already, and reading it back
        would only repeat what the publisher had in hand. Otherwise the pump is woken to read it
        from the file when it can (a crash or a stop leaves it there, to be delivered then)."""
        if self._caught_up and not self.window.full and delivery.offset > self._fetched:
            self._offer(delivery)
            self._start_ready()
            return
        self._caught_up = False
        self.wake.set()

    async def _sleep(self) -> None:
        await wait_event(self.wake, IDLE_WAKE_SECONDS)

    def _offer(self, delivery: Delivery) -> None:
        self._fetched = delivery.offset
        # A message with no key is a key of its own: keyless messages do not wait for each other.
        key = delivery.key if delivery.key is not None else ("no key", delivery.offset)
        self.window.offer(Held(0, delivery.offset, key, delivery))

    def _start_ready(self) -> None:
        for held in self.window.start():
            task = asyncio.create_task(self._handle(held), context=self._context.copy())
            self._handlers.add(task)
            task.add_done_callback(self._handler_ended)

    async def _handle(self, held: Held[Delivery]) -> None:
        await _deliver_until_done(self._consumer, held.item)
        was_full = self.window.full
        point = self.window.finish(held)
        if point is not None:
            self._commit_below(point)
        self._start_ready()  # the next of its key, or of another key now within the limit
        if was_full:
            self.wake.set()  # the pump stopped reading for want of room: there is some now

    def _handler_ended(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            # A bug, not a failed delivery (those are retried): the message stays in flight,
            # holding back its key and the commits, so say so loudly.
            log.error("bus.handler_crashed", consumer=self._consumer.name, exc_info=error)

    def _commit_below(self, point: int) -> None:
        """Everything below ``point`` (Kafka's convention: the next offset to read) is finished.
        One write in flight per pump: a commit asked for while one is written is folded into
        the next, which covers the newest point."""
        self._to_commit = max(self._to_commit, point - 1)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._write_commits())

    async def _write_commits(self) -> None:
        while self._committed < self._to_commit:
            offset = self._to_commit
            try:
                await self._bus._commit(self._group_id, self._topic, offset)
            except Exception as exc:
                # A busy database: the messages are finished, the commit waits (a crash now would
                # redeliver them, which the handlers absorb).
                log.warning("bus.commit_failed", consumer=self._consumer.name, error=repr(exc))
                await asyncio.sleep(RETRY_DELAY_SECONDS / 10)
                continue
            self._committed = offset

    async def _abandon_in_flight(self) -> None:
        """The pump is stopping: what is in flight is cancelled, unfinished, to be delivered
        again on the next start as after a crash; what was finished below it is committed."""
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        if self._committer is not None and not self._committer.done():
            # Its write may be half done; the one below covers it (a commit only moves forward).
            self._committer.cancel()
            await asyncio.gather(self._committer, return_exceptions=True)
        if self._committed < self._to_commit:
            # One attempt, not retries: a stop must not hang on a database that fails.
            try:
                await self._bus._commit(self._group_id, self._topic, self._to_commit)
            except Exception as exc:
                log.warning("bus.commit_failed", consumer=self._consumer.name, error=repr(exc))


async def _deliver_until_done(consumer: DeliveryHandler, delivery: Delivery) -> None:
    # The consumer dead-letters what can never succeed and raises for what may succeed
    # later (it has paused already): delivering again is the redelivery Kafka would do.
    while True:
        try:
            await consumer.deliver(delivery)
            return
        except Exception:
            log.info("bus.redeliver", consumer=consumer.name, offset=delivery.offset)
            await asyncio.sleep(RETRY_DELAY_SECONDS / 10)
