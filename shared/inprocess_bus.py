"""The in-process bus of ``interlock dev``: Kafka's delivery rules in one process, on SQLite.

Each topic is an append-only log (one table for all topics, ordered by row id); each consumer
group has a committed offset per topic. One pump per (group, topic) hands the messages in order
to that group's ``Consumer`` (the very wrapper the Kafka subscribers use: same decoding, dead
letters and retries), commits after it returns, and delivers the message again after it raises.
A publish returns once the message is stored, so what was in flight survives a restart of the
process, as it would on Kafka. One partition per topic: order is total, which is more than the
per-key order the services rely on.

Retention: a message is deleted once every consumer group reading its topic has committed past
it (``prune``). Nothing reads it again then: the pumps read above their group's offset, ``lag``
counts above it, and row ids are never reused (AUTOINCREMENT), so an emptied topic goes on
numbering from where it was. A group registered here with no offset yet holds its whole topic.
A topic no consumer of this process reads (the dead letters) keeps its newest
``KEEP_UNCONSUMED`` messages, for whoever looks at them, like a Kafka topic's retention.
Pruning runs when the bus starts and stops, and in between after ``PRUNE_EVERY_COMMITS``
commits or ``PRUNE_EVERY_SECONDS`` (checked at each commit and when a pump runs out of
messages), one indexed ``DELETE`` per topic that changed: never a scan per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import aiosqlite
import structlog
from pydantic import BaseModel

from shared import tracing
from shared.bus import RETRY_DELAY_SECONDS, Delivery, DeliveryHandler
from shared.events import encode_event

log = structlog.get_logger(__name__)

BATCH = 100
IDLE_WAKE_SECONDS = 1.0
"""A pump with nothing to do looks again this often even without a wake-up (belt and braces)."""
PRUNE_EVERY_COMMITS = 100
PRUNE_EVERY_SECONDS = 1.0
KEEP_UNCONSUMED = 1000
"""Messages kept of a topic that no consumer group of this process reads."""

SCHEMA = """
-- AUTOINCREMENT: ids are never reused, even once pruning has emptied the table, so a new
-- message is always above every committed offset.
CREATE TABLE IF NOT EXISTS bus_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    key TEXT,
    headers TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS bus_messages_by_topic ON bus_messages (topic, id);
CREATE TABLE IF NOT EXISTS bus_offsets (
    group_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    committed INTEGER NOT NULL,
    PRIMARY KEY (group_id, topic)
);
"""


class InProcessBus:
    """Publisher and consumer host in one; ``start()`` opens the log and starts the pumps."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._db: aiosqlite.Connection | None = None
        self._write = asyncio.Lock()
        self._consumers: list[tuple[str, str, DeliveryHandler]] = []
        self._wake: dict[str, list[asyncio.Event]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._changed: set[str] = set()
        """Topics with commits (or, unread, publishes) since the last prune."""
        self._commits_since_prune = 0
        self._last_prune = time.monotonic()

    def add_consumer(
        self,
        topic: str,
        group_id: str,
        consumer: DeliveryHandler,
        *,
        limit: int = 1,
        max_held: int | None = None,
    ) -> None:
        if self._tasks:
            raise RuntimeError("add consumers before the bus starts")
        self._consumers.append((topic, group_id, consumer))

    async def start(self) -> None:
        db = await aiosqlite.connect(self._path)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute("PRAGMA busy_timeout=5000")
        # Deleted messages are overwritten, not left in free pages of the file.
        await db.execute("PRAGMA secure_delete=ON")
        await db.executescript(SCHEMA)
        await db.commit()
        self._db = db
        # What was committed before a stop or a crash and not pruned yet.
        async with db.execute("SELECT DISTINCT topic FROM bus_messages") as cursor:
            self._changed = {str(row[0]) for row in await cursor.fetchall()}
        await self.prune()
        for topic, group_id, consumer in self._consumers:
            wake = asyncio.Event()
            self._wake.setdefault(topic, []).append(wake)
            task = asyncio.create_task(self._pump(topic, group_id, consumer, wake))
            self._tasks.append(task)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._wake = {}
        if self._db is not None:
            await self.prune()
            await self._db.close()
            self._db = None

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        event_type = str(getattr(event, "type", type(event).__name__))
        all_headers = {
            **(headers or {}),
            "content-type": "application/json",
            "event-type": event_type,
        }
        with tracing.publishing(topic, event_type, key, all_headers):
            await self.publish_raw(encode_event(event), topic, key=key, headers=all_headers)

    async def publish_raw(
        self, body: bytes, topic: str, *, key: str | None, headers: dict[str, str] | None = None
    ) -> None:
        """Append a message as it is (an outside producer's bytes, valid or not)."""
        async with self._write:
            db = self._connection()
            await db.execute(
                "INSERT INTO bus_messages (topic, key, headers, body) VALUES (?, ?, ?, ?)",
                (topic, key, json.dumps(headers or {}), body),
            )
            await db.commit()
            if not self._groups(topic):
                self._changed.add(topic)  # nobody reads it here: kept to KEEP_UNCONSUMED
        for wake in self._wake.get(topic, []):
            wake.set()

    async def prune(self) -> int:
        """Delete what every consumer group of its topic has committed (and the oldest messages
        of unread topics beyond ``KEEP_UNCONSUMED``); returns how many were deleted."""
        async with self._write:
            db = self._connection()
            changed, self._changed = self._changed, set()
            self._commits_since_prune = 0
            self._last_prune = time.monotonic()
            deleted = 0
            try:
                for topic in sorted(changed):
                    groups = self._groups(topic)
                    if groups:
                        floor = await self._floor(topic, groups)
                        cursor = await db.execute(
                            "DELETE FROM bus_messages WHERE topic = ? AND id <= ?", (topic, floor)
                        )
                    else:
                        cursor = await db.execute(
                            "DELETE FROM bus_messages WHERE topic = ? AND id <= (SELECT id FROM"
                            " bus_messages WHERE topic = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                            (topic, topic, KEEP_UNCONSUMED),
                        )
                    deleted += max(cursor.rowcount, 0)
                await db.commit()
            except BaseException:
                # Cancelled (the bus stopping) or failed: the next prune does these topics.
                self._changed |= changed
                raise
        if deleted:
            log.debug("bus.pruned", messages=deleted, topics=len(changed))
        return deleted

    def _groups(self, topic: str) -> set[str]:
        return {group for t, group, _ in self._consumers if t == topic}

    async def _floor(self, topic: str, groups: set[str]) -> int:
        """The offset every group in ``groups`` has committed on ``topic`` (0: one has none)."""
        async with self._connection().execute(
            "SELECT group_id, committed FROM bus_offsets WHERE topic = ?", (topic,)
        ) as cursor:
            committed = {str(g): int(c) for g, c in await cursor.fetchall()}
        return min(committed.get(g, 0) for g in groups)

    async def _maybe_prune(self) -> None:
        if not self._changed:
            return
        due = time.monotonic() - self._last_prune >= PRUNE_EVERY_SECONDS
        if due or self._commits_since_prune >= PRUNE_EVERY_COMMITS:
            # Housekeeping inside a pump: a failure (a busy database, say) must not stop the
            # delivery; the topics stay marked and the next prune does them.
            try:
                await self.prune()
            except Exception as exc:
                log.warning("bus.prune_failed", error=repr(exc))

    async def lag(self) -> int:
        """Messages published and not yet committed by every consumer (0: all caught up)."""
        total = 0
        db = self._connection()
        for topic, group_id, _ in self._consumers:
            committed = await self._committed(group_id, topic)
            async with db.execute(
                "SELECT COUNT(*) FROM bus_messages WHERE topic = ? AND id > ?", (topic, committed)
            ) as cursor:
                row = await cursor.fetchone()
            total += int(row[0]) if row else 0
        return total

    def _connection(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("the in-process bus is not started")
        return self._db

    async def _committed(self, group_id: str, topic: str) -> int:
        async with self._connection().execute(
            "SELECT committed FROM bus_offsets WHERE group_id = ? AND topic = ?",
            (group_id, topic),
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def _commit(self, group_id: str, topic: str, offset: int) -> None:
        async with self._write:
            db = self._connection()
            await db.execute(
                "INSERT INTO bus_offsets (group_id, topic, committed) VALUES (?, ?, ?)"
                " ON CONFLICT (group_id, topic) DO UPDATE SET committed = excluded.committed",
                (group_id, topic, offset),
            )
            await db.commit()
            self._changed.add(topic)
            self._commits_since_prune += 1
        await self._maybe_prune()

    async def _pump(
        self, topic: str, group_id: str, consumer: DeliveryHandler, wake: asyncio.Event
    ) -> None:
        while True:
            wake.clear()
            committed = await self._committed(group_id, topic)
            async with self._connection().execute(
                "SELECT id, key, headers, body FROM bus_messages"
                " WHERE topic = ? AND id > ? ORDER BY id LIMIT ?",
                (topic, committed, BATCH),
            ) as cursor:
                rows = list(await cursor.fetchall())
            if not rows:
                await self._maybe_prune()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), IDLE_WAKE_SECONDS)
                continue
            for offset, key, headers, body in rows:
                delivery = Delivery(
                    topic=topic,
                    partition=0,
                    offset=int(offset),
                    key=key,
                    body=bytes(body),
                    headers=json.loads(headers),
                )
                await self._deliver_until_done(consumer, delivery)
                await self._commit(group_id, topic, int(offset))

    @staticmethod
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
