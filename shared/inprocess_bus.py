"""The in-process bus of ``interlock dev``: Kafka's delivery rules in one process, on SQLite.

Each topic is an append-only log (one table for all topics, ordered by row id); each consumer
group has a committed offset per topic. One pump per (group, topic), ``shared/inprocess_pump.py``,
hands the messages to that group's ``Consumer`` (the very wrapper the Kafka subscribers use: same
decoding, dead letters and retries) as the Kafka consumers do (issue 19): through a
``KeyedWindow``, up to the consumer's ``limit`` at once, those of one key strictly in order and
one at a time, those of different keys (different executions) concurrently. A message is
delivered again until the consumer returns (it raises for what may succeed later). A publish
returns once the message is stored, so what was in flight survives a restart of the process, as
it would on Kafka; ``publish_all`` stores several in one transaction. One partition per topic:
order is per key, with concurrency across keys; a message with no key is a key of its own. The
file is used on the event loop's thread (``shared/store/sqlite/connection.py``).

Offsets. The ``committed`` column is the highest row id of the topic that the group is done
with, and everything of the topic below it is done too: a pump commits below the oldest message
it has not finished, never past it, so a crash (or ``stop()``, which cancels what is in flight)
redelivers every unfinished message, and perhaps some finished above it, which the handlers'
idempotency guards absorb. Commits are coalesced: one write in flight per pump, covering the
newest point when it goes, and the offsets of every group written together, at most every
``commit_interval_seconds`` (as the Kafka consumers commit), at once on ``stop()``.

Back-pressure. A pump reads the rows above the highest it has fetched (on start, above the
committed offset), no more than its window has room for (``max_held``: in flight or waiting
behind their key), and stops reading while the window is full; it wakes on a publish to its
topic and on a finished message that makes room, and otherwise sleeps. A pump that has read
everything before a message just published takes it from the publisher as it is stored
(``Pump.published``) while its window has room, instead of reading it back.

Listeners (``add_listener``, ``shared/bus.py``'s ``ListenerHost``): no group, no offset, no
pump. ``publish_raw`` hands each message to every listener of its topic once it is stored, in
the publishing coroutine, so a listener hears what is published on this bus from when it was
added (before or after ``start``), in publish order. Nothing is kept for them: they do not
hold back retention, and a topic that only listeners hear is not written to the log at all.

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
import contextvars
import functools
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import structlog
from pydantic import BaseModel

from shared.bus import Delivery, DeliveryHandler, Listener, Outgoing
from shared.bus_headers import publishing
from shared.events import encode_event
from shared.inprocess_pump import Pump, Subscription
from shared.keyed_window import KeyedWindow
from shared.store.sqlite.connection import LoopConnection, transaction
from shared.waiting import wait_event

log = structlog.get_logger(__name__)

PRUNE_EVERY_COMMITS = 100
PRUNE_EVERY_SECONDS = 1.0
KEEP_UNCONSUMED = 1000
"""Messages kept of a topic that no consumer group of this process reads."""
COMMIT_INTERVAL_SECONDS = 0.2
"""A consumer group's offsets are written at most this often (the Kafka consumers' default,
``INTERLOCK_CONSUMER_COMMIT_INTERVAL_MS``): all the groups' in one transaction, and after a
crash at most this much finished work is delivered again, which the handlers absorb."""
BUSY_TIMEOUT_MS = 5_000
"""How long a statement waits for a lock another process holds on the file (nothing of this
process ever holds one across an await: ``shared/store/sqlite/connection.py``)."""

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
    """Publisher, consumer host and listener host in one; ``start()`` opens the log and starts
    the pumps."""

    def __init__(
        self, path: str | Path, *, commit_interval_seconds: float = COMMIT_INTERVAL_SECONDS
    ) -> None:
        self._path = str(path)
        self._db: LoopConnection | None = None
        self._write = asyncio.Lock()
        self._consumers: list[Subscription] = []
        self._listeners: dict[str, list[Listener]] = {}
        """By topic, in the order they were added."""
        self._heard_only: dict[str, int] = {}
        """The last offset told of each topic that only listeners hear (never written)."""
        self._pumps: dict[tuple[str, str], Pump] = {}
        """By (group, topic), while the bus runs."""
        self._readers: dict[str, list[Pump]] = {}
        """The pumps of each topic, told of every message published to it."""
        self._tasks: list[asyncio.Task[None]] = []
        self._changed: set[str] = set()
        """Topics with commits (or, unread, publishes) since the last prune."""
        self._commits_since_prune = 0
        self._last_prune = time.monotonic()
        self._commit_interval = commit_interval_seconds
        self._offsets_due: dict[tuple[str, str], int] = {}
        """By (group, topic): the offsets asked for and not written yet."""
        self._offsets_written: asyncio.Future[None] | None = None
        """Done once the offsets due are written (None: none is due)."""
        self._flush_offsets = asyncio.Event()
        """Set while the bus stops: offsets are written at once."""
        self._offset_writer: asyncio.Task[None] | None = None

    def add_consumer(
        self,
        topic: str,
        group_id: str,
        consumer: DeliveryHandler,
        *,
        limit: int = 1,
        max_held: int | None = None,
    ) -> None:
        """Deliver ``topic``'s messages to ``consumer`` (its group's only one here): up to
        ``limit`` at once, those of one key strictly in order, at most ``max_held`` fetched and
        not finished (default ``limit``)."""
        if self._tasks:
            raise RuntimeError("add consumers before the bus starts")
        if any(s.topic == topic and s.group_id == group_id for s in self._consumers):
            # Two pumps of one group on one topic would each deliver every message.
            raise ValueError(f"group {group_id!r} already has a consumer of {topic!r}")
        held = limit if max_held is None else max_held
        KeyedWindow[Delivery](limit=limit, max_held=held)  # limits that make no sense fail here
        self._consumers.append(Subscription(topic, group_id, consumer, limit, held))

    def add_listener(self, topic: str, listener: Listener) -> None:
        """Have ``listener`` hear every message of ``topic`` published on this bus from now on
        (before or after ``start``), right after it is stored."""
        self._listeners.setdefault(topic, []).append(listener)

    def lag_monitor(self) -> None:
        """No ``interlock_consumer_lag`` here (``Bus.lag_monitor``)."""
        return None

    def held(self, group_id: str, topic: str) -> int:
        """Messages of ``topic`` the group's pump holds (in flight, or fetched and waiting behind
        their key): never more than its ``max_held``. 0 while the bus is not running."""
        pump = self._pumps.get((group_id, topic))
        return pump.window.held if pump is not None else 0

    async def start(self) -> None:
        # Deleted messages are overwritten, not left in free pages of the file.
        db = await asyncio.to_thread(
            LoopConnection.open,
            self._path,
            busy_timeout_ms=BUSY_TIMEOUT_MS,
            pragmas="PRAGMA secure_delete = ON;",
        )
        await db.run(lambda raw: raw.executescript(SCHEMA))
        self._db = db
        # What was committed before a stop or a crash and not pruned yet.
        rows = await db.run(lambda raw: raw.execute("SELECT DISTINCT topic FROM bus_messages"))
        self._changed = {str(row[0]) for row in rows}
        await self.prune()
        for subscription in self._consumers:
            pump = Pump(self, subscription)
            self._pumps[(subscription.group_id, subscription.topic)] = pump
            self._readers.setdefault(subscription.topic, []).append(pump)
            self._tasks.append(asyncio.create_task(pump.run()))

    async def stop(self) -> None:
        """Stop as a crash would, but tidily: the pumps and the messages in flight are cancelled
        (redelivered on the next start), what was finished below them is committed."""
        self._flush_offsets.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._pumps = {}
        self._readers = {}
        if self._offset_writer is not None:
            # Whatever offsets a cancelled committer left due are written before the file closes.
            await asyncio.wait([self._offset_writer])
            self._offset_writer = None
        self._flush_offsets.clear()
        if self._db is not None:
            await self.prune()
            await self._db.close()
            self._db = None

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        with publishing(event, topic, key, headers) as all_headers:
            await self.publish_raw(encode_event(event), topic, key=key, headers=all_headers)

    async def publish_all(self, messages: Sequence[Outgoing]) -> None:
        """Publish ``messages`` in this order (``shared/bus.py``'s ``publish_in_order``): stored
        in one transaction, so one commit for all of them, and handed over once it is done."""
        rows = []
        for message in messages:
            # The span covers handing the message over, as on Kafka (the commit is shared).
            with publishing(
                message.event, message.topic, message.key, message.headers
            ) as all_headers:
                body = encode_event(message.event)
                rows.append(_Row(message.topic, message.key, all_headers, body))
        await self._append(rows)

    async def publish_raw(
        self, body: bytes, topic: str, *, key: str | None, headers: dict[str, str] | None = None
    ) -> None:
        """Append a message as it is (an outside producer's bytes, valid or not)."""
        await self._append([_Row(topic, key, dict(headers or {}), body)])

    async def _append(self, rows: Sequence[_Row]) -> None:
        """Store ``rows`` (one statement, or one transaction for several) and, once they are
        committed, hand each to its topic's pumps and listeners, in order."""
        # A topic only listeners hear (the gateway's execution.activity): nothing would ever
        # read it from the log, so it is not written there, and costs no disk write.
        stored = [row for row in rows if not self._heard_only_topic(row.topic)]
        offsets: list[int] = []
        if stored:
            async with self._write:
                # Stored (and committed) when it returns.
                offsets = await self._connection().run(lambda raw: _insert(raw, stored))
                for row in stored:
                    if not self._groups(row.topic):
                        self._changed.add(row.topic)  # nobody reads it: kept to KEEP_UNCONSUMED
        # Still in row id order (nothing awaited since the lock was released): each pump of the
        # topic takes the message it would otherwise read back from the file, when it has read
        # everything before it.
        ids = iter(offsets)
        for row in rows:
            if self._heard_only_topic(row.topic):
                offset = self._heard_only[row.topic] = self._heard_only.get(row.topic, 0) + 1
            else:
                offset = next(ids)
            delivery = Delivery(
                row.topic, 0, offset, key=row.key, body=row.body, headers=row.headers
            )
            for pump in self._readers.get(row.topic, ()):
                pump.published(delivery)
            self._tell_listeners(delivery)

    def _heard_only_topic(self, topic: str) -> bool:
        return bool(self._listeners.get(topic)) and not self._groups(topic)

    def _tell_listeners(self, delivery: Delivery) -> None:
        # Outside the write lock (a listener never holds up other publishes), yet in row id
        # order: nothing between the commit and this call awaits, so the next publish cannot
        # write (let alone tell) before this one has told every listener. A copy of the list:
        # one added by a listener hears the next message, not this one.
        for listener in list(self._listeners.get(delivery.topic, ())):
            try:
                # A context of its own: a listener does not inherit the publisher's log
                # bindings or span, as on a message heard in another process.
                contextvars.Context().run(listener, delivery)
            except Exception:
                # No redelivery for a listener: this message is lost to it, the next one is not,
                # and the other listeners hear this one all the same.
                log.exception("listener.failed", topic=delivery.topic, offset=delivery.offset)

    async def prune(self) -> int:
        """Delete what every consumer group of its topic has committed (and the oldest messages
        of unread topics beyond ``KEEP_UNCONSUMED``); returns how many were deleted."""
        async with self._write:
            changed, self._changed = self._changed, set()
            self._commits_since_prune = 0
            self._last_prune = time.monotonic()
            if not changed:
                return 0
            try:
                groups = {topic: self._groups(topic) for topic in sorted(changed)}
                deleted = await self._connection().run(
                    lambda raw: transaction(raw, lambda t: _delete_done(t, groups))
                )
            except BaseException:
                # Cancelled (the bus stopping) or failed: the next prune does these topics.
                self._changed |= changed
                raise
        if deleted:
            log.debug("bus.pruned", messages=deleted, topics=len(changed))
        return deleted

    def _groups(self, topic: str) -> set[str]:
        return {s.group_id for s in self._consumers if s.topic == topic}

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
        for subscription in self._consumers:
            topic = subscription.topic
            committed = await self._committed(subscription.group_id, topic)
            total += await self._connection().run(
                functools.partial(_count_above, topic=topic, offset=committed)
            )
        return total

    def _connection(self) -> LoopConnection:
        if self._db is None:
            raise RuntimeError("the in-process bus is not started")
        return self._db

    async def _committed(self, group_id: str, topic: str) -> int:
        """The highest id of ``topic`` the group is done with, and every one below it (0: none)."""
        rows = await self._connection().run(
            lambda raw: raw.execute(
                "SELECT committed FROM bus_offsets WHERE group_id = ? AND topic = ?",
                (group_id, topic),
            ).fetchall()
        )
        return int(rows[0][0]) if rows else 0

    async def _commit(self, group_id: str, topic: str, offset: int) -> None:
        """Write that ``group_id`` is done with ``topic`` up to ``offset``; return once it is
        written. Every offset asked for within ``commit_interval`` is written together, in one
        transaction (at once while the bus stops)."""
        key = (group_id, topic)
        self._offsets_due[key] = max(offset, self._offsets_due.get(key, 0))
        written = self._offsets_written
        if written is None:
            written = self._offsets_written = asyncio.get_running_loop().create_future()
            # Read here too: whoever waited for it may be gone (a stop cancels the pumps).
            written.add_done_callback(lambda f: f.cancelled() or f.exception())
            # Not a pump's: it must outlive the pump that asked first, for the others.
            self._offset_writer = asyncio.create_task(
                self._write_offsets(written), context=contextvars.Context()
            )
        await asyncio.shield(written)
        await self._maybe_prune()

    async def _write_offsets(self, written: asyncio.Future[None]) -> None:
        try:
            await wait_event(self._flush_offsets, self._commit_interval)
            async with self._write:
                # What is asked from now on goes into the next write.
                due, self._offsets_due, self._offsets_written = self._offsets_due, {}, None
                rows = [(group, topic, offset) for (group, topic), offset in due.items()]
                await self._connection().run(
                    lambda raw: transaction(raw, lambda t: t.executemany(_UPSERT_OFFSET, rows))
                )
                self._changed |= {topic for _, topic in due}
                self._commits_since_prune += len(rows)
        except BaseException as exc:
            if self._offsets_written is written:  # failed before it took the offsets
                self._offsets_written = None
            # Each pump asks again for its own offset (``Pump._write_commits``).
            written.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        written.set_result(None)

    async def _rows_above(self, topic: str, offset: int, count: int) -> list[Delivery]:
        """``topic``'s next ``count`` messages (at most) after ``offset``, oldest first."""
        rows = await self._connection().run(
            lambda raw: raw.execute(
                "SELECT id, key, headers, body FROM bus_messages"
                " WHERE topic = ? AND id > ? ORDER BY id LIMIT ?",
                (topic, offset, count),
            ).fetchall()
        )
        return [
            Delivery(
                topic=topic,
                partition=0,
                offset=int(row_id),
                key=key,
                body=bytes(body),
                headers=json.loads(headers),
            )
            for row_id, key, headers, body in rows
        ]


class _Row(NamedTuple):
    topic: str
    key: str | None
    headers: dict[str, str]
    body: bytes


_UPSERT_OFFSET = (
    "INSERT INTO bus_offsets (group_id, topic, committed) VALUES (?, ?, ?)"
    " ON CONFLICT (group_id, topic) DO UPDATE SET committed = excluded.committed"
)
_INSERT = "INSERT INTO bus_messages (topic, key, headers, body) VALUES (?, ?, ?, ?)"


def _insert(raw: sqlite3.Connection, rows: Sequence[_Row]) -> list[int]:
    """Append ``rows`` (one statement in autocommit mode, or one transaction for several); their
    row ids are their offsets."""

    def each(connection: sqlite3.Connection) -> list[int]:
        offsets = []
        for row in rows:
            offset = connection.execute(
                _INSERT, (row.topic, row.key, json.dumps(row.headers), row.body)
            ).lastrowid
            assert offset is not None  # always set by an INSERT into a table with row ids
            offsets.append(offset)
        return offsets

    return each(raw) if len(rows) == 1 else transaction(raw, each)


def _count_above(raw: sqlite3.Connection, *, topic: str, offset: int) -> int:
    row = raw.execute(
        "SELECT COUNT(*) FROM bus_messages WHERE topic = ? AND id > ?", (topic, offset)
    ).fetchone()
    return int(row[0]) if row else 0


def _delete_done(raw: sqlite3.Connection, groups: dict[str, set[str]]) -> int:
    """Delete, of each topic, what all its ``groups`` committed (with no group: all but the
    newest ``KEEP_UNCONSUMED``); returns how many messages were deleted."""
    deleted = 0
    for topic, readers in groups.items():
        if readers:
            committed = dict(
                raw.execute(
                    "SELECT group_id, committed FROM bus_offsets WHERE topic = ?", (topic,)
                ).fetchall()
            )
            floor = min(int(committed.get(g, 0)) for g in readers)  # 0: one has none yet
            cursor = raw.execute(
                "DELETE FROM bus_messages WHERE topic = ? AND id <= ?", (topic, floor)
            )
        else:
            cursor = raw.execute(
                "DELETE FROM bus_messages WHERE topic = ? AND id <= (SELECT id FROM"
                " bus_messages WHERE topic = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (topic, topic, KEEP_UNCONSUMED),
            )
        deleted += max(cursor.rowcount, 0)
    return deleted
