"""Threads (shared/store/threads.py) on SQLite: one row per (project, workspace, thread), inserted
once, in ``workspace_threads``.

Listing a workspace is a range of ``workspace_threads_listed``, read backwards: its columns are
the filter's, then the order's.

What moves as a thread is used, its turns hint and its retention (``ttl_minutes``, and
``expires_key``: ``expires_at`` as text that sorts like the time), is a row of
``workspace_thread_activity`` under the thread's key, joined on every read (each read stays one
query). A table of their own rather than columns: ``CREATE TABLE IF NOT EXISTS`` adds no column
to the table of an existing database, and a note never writes the thread's row, nor a metadata
update the activity, so neither can lose the other's write. A note, with its expiry or without,
is one upsert that keeps the greater values and inserts nothing for a thread that does not exist
(nor, given an expiry, for a tombstone); so is ``set_ttl``. Triggers keep the row in step with
its thread in the same statement: deleted with it, so a thread created again under the id starts
at 0, and, when it is marked deleted, its ttl cleared and its expiry set to the deletion time (a
tombstone's erasure is due: shared/store/threads.py), inserted if the thread had no row.
``expired`` reads ``workspace_threads_expiring``, an index of the expiries set, soonest first,
live threads and tombstones alike; ``erasure_done`` is one update of a tombstone's row.

A create is two statements when the record has turns or a ttl (the thread, then its activity):
cut off between them, the hint trails, as hints may, and the thread has no expiry until its
first turn notes one; it is then deleted later than its ttl, never earlier.

The release before retention kept the hints in ``workspace_thread_turns`` (turns only). The
schema script moves them into ``workspace_thread_activity`` at every start-up, as it moves the
previous release's threads (below): an upsert keeping the greater hint, then a delete.

A tombstone (``mark_deleted``) is the row with ``deleted_at`` set in its body (the emptied
metadata beside it), so the table of an existing database needs no new column. The mark writes
``deleted_at`` as UTC text, to the microsecond with ``+00:00`` (``_deleted_text``), so the trigger
makes the expiry key of it with ``substr`` alone: ``expiry_key`` of the same time. The schema
script replaces the trigger at every start-up (in one transaction), so a database of the release
before, whose trigger cleared the expiry, takes this one. ``list`` reads
``workspace_threads_live``, the listing index of the rows whose body has no ``deleted_at``
(a partial index, on a deterministic function of the body): tombstones are kept for good, and
the listing never walks them.

The previous release's table, ``threads``, was keyed by (project, thread). The schema script moves
its rows into ``workspace_threads`` under the workspace each was created in, at every start-up
(the one process of ``interlock dev`` runs it before it serves): an insert that skips what is
there already, then a delete, so a start cut off between the two repeats both harmlessly. The
emptied table is kept for the script to read from.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pydantic_core

from shared.store.errors import StoreUnavailable
from shared.store.sqlite.database import Database
from shared.store.threads import (
    ThreadRecord,
    body_json,
    check_page,
    check_turn,
    created_key,
    expiry_key,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspace_threads (
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    created_key TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (project_id, workspace_id, thread_id)
);
CREATE INDEX IF NOT EXISTS workspace_threads_listed
    ON workspace_threads (project_id, workspace_id, created_key, thread_id);
CREATE TABLE IF NOT EXISTS threads (
    project_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_key TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (project_id, thread_id)
);
INSERT OR IGNORE INTO workspace_threads
    (project_id, workspace_id, thread_id, created_key, body)
    SELECT project_id, workspace_id, thread_id, created_key, body FROM threads;
DELETE FROM threads;
DROP INDEX IF EXISTS threads_by_workspace;
CREATE INDEX IF NOT EXISTS workspace_threads_live
    ON workspace_threads (project_id, workspace_id, created_key, thread_id)
    WHERE json_extract(body, '$.deleted_at') IS NULL;
CREATE TABLE IF NOT EXISTS workspace_thread_turns (
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    turns INTEGER NOT NULL,
    PRIMARY KEY (project_id, workspace_id, thread_id)
);
CREATE TRIGGER IF NOT EXISTS workspace_thread_deleted AFTER DELETE ON workspace_threads
BEGIN
    DELETE FROM workspace_thread_turns WHERE project_id = OLD.project_id
        AND workspace_id = OLD.workspace_id AND thread_id = OLD.thread_id;
END;
CREATE TABLE IF NOT EXISTS workspace_thread_activity (
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    ttl_minutes REAL,
    expires_key TEXT,
    PRIMARY KEY (project_id, workspace_id, thread_id)
);
INSERT INTO workspace_thread_activity (project_id, workspace_id, thread_id, turns)
    SELECT o.project_id, o.workspace_id, o.thread_id, o.turns FROM workspace_thread_turns AS o
    JOIN workspace_threads USING (project_id, workspace_id, thread_id) WHERE true
    ON CONFLICT (project_id, workspace_id, thread_id)
    DO UPDATE SET turns = MAX(turns, excluded.turns);
DELETE FROM workspace_thread_turns;
CREATE INDEX IF NOT EXISTS workspace_threads_expiring
    ON workspace_thread_activity (expires_key) WHERE expires_key IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS workspace_thread_activity_deleted AFTER DELETE ON workspace_threads
BEGIN
    DELETE FROM workspace_thread_activity WHERE project_id = OLD.project_id
        AND workspace_id = OLD.workspace_id AND thread_id = OLD.thread_id;
END;
BEGIN;
DROP TRIGGER IF EXISTS workspace_thread_marked;
CREATE TRIGGER workspace_thread_marked AFTER UPDATE OF body ON workspace_threads
    WHEN json_extract(NEW.body, '$.deleted_at') IS NOT NULL
        AND json_extract(OLD.body, '$.deleted_at') IS NULL
BEGIN
    INSERT INTO workspace_thread_activity (project_id, workspace_id, thread_id, expires_key)
        VALUES (NEW.project_id, NEW.workspace_id, NEW.thread_id,
            substr(json_extract(NEW.body, '$.deleted_at'), 1, 23) || '000+00:00')
        ON CONFLICT (project_id, workspace_id, thread_id)
        DO UPDATE SET ttl_minutes = NULL, expires_key = excluded.expires_key;
END;
COMMIT;
"""
"""The trigger ``workspace_thread_marked`` fires on a live thread's mark only (OLD live), so a
tombstone marked again, or a later write of its body, never gives an erased tombstone its expiry
back. Its key is ``expiry_key`` of the deletion time as the mark writes it (``_deleted_text``):
the first 23 characters are the time to the millisecond, the rest ``000+00:00``."""


def _live(body: str = "body") -> str:
    """Not a tombstone: the partial index's WHERE, which SQLite matches only as written."""
    return f"json_extract({body}, '$.deleted_at') IS NULL"


ACTIVITY = "COALESCE(n.turns, 0) AS turns, n.ttl_minutes, n.expires_key"
"""A thread's activity columns as ``_thread`` reads them (turns 0 before the first note)."""

SELECTED = (
    f"SELECT t.body, {ACTIVITY} FROM workspace_threads AS t"
    " LEFT JOIN workspace_thread_activity AS n USING (project_id, workspace_id, thread_id)"
)
"""A thread with its activity."""

ACTIVITY_OF_UPDATED = ", ".join(
    f"(SELECT {column} FROM workspace_thread_activity AS n"
    " WHERE n.project_id = workspace_threads.project_id"
    " AND n.workspace_id = workspace_threads.workspace_id"
    f" AND n.thread_id = workspace_threads.thread_id) AS {name}"
    for column, name in (
        ("COALESCE(MAX(n.turns), 0)", "turns"),  # MAX: a row even when there is none
        ("n.ttl_minutes", "ttl_minutes"),
        ("n.expires_key", "expires_key"),
    )
)
"""``ACTIVITY`` for the RETURNING clause of an update of ``workspace_threads``."""

NOTED = (
    "INSERT INTO workspace_thread_activity"
    " (project_id, workspace_id, thread_id, turns, expires_key, ttl_minutes)"
    " SELECT project_id, workspace_id, thread_id, ?, ?, ? FROM workspace_threads"
    " WHERE project_id = ? AND workspace_id = ? AND thread_id = ?"
)
"""An activity row whose source is the thread's, so a thread that does not exist gets none. (The
WHERE also tells SQLite's parser that ON CONFLICT is the upsert's, not a join's.)"""

KEEP_THE_GREATER = (
    " ON CONFLICT (project_id, workspace_id, thread_id) DO UPDATE"
    " SET turns = MAX(turns, excluded.turns),"
    # '' sorts before every key, so a row without an expiry takes the note's; a note without one
    # (MAX of a NULL is NULL) keeps the row's.
    " expires_key = COALESCE(MAX(COALESCE(expires_key, ''), excluded.expires_key), expires_key)"
)
"""A note keeps the greater turn and the later expiry."""


def _key(at: datetime | None) -> str | None:
    return expiry_key(at) if at is not None else None


def _deleted_text(at: datetime) -> str:
    """The deletion time as the mark writes it in the body: UTC, microseconds, ``+00:00``, which
    the trigger cuts to its expiry key (``SCHEMA``). A naive time is refused, as an expiry is."""
    expiry_key(at)  # raises on a naive time
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _thread(row: sqlite3.Row) -> ThreadRecord:
    key = row["expires_key"]
    return ThreadRecord.model_validate_json(row["body"]).model_copy(
        update={
            "turns": row["turns"],
            "ttl_minutes": row["ttl_minutes"],
            "expires_at": datetime.fromisoformat(key) if key is not None else None,
        }
    )


class SqliteThreads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        # Twice at most: a delete between this insert's conflict and the read frees the id, and
        # the create then creates (a create after the delete). Deleted a second time in that
        # window, the id is being fought over: the caller is told to retry.
        for _ in range(2):
            inserted = await self._db.execute(
                "INSERT INTO workspace_threads"
                " (project_id, workspace_id, thread_id, created_key, body)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    thread.project_id,
                    thread.workspace_id,
                    thread.thread_id,
                    created_key(thread),
                    body_json(thread),
                ),
            )
            if inserted:
                if thread.turns or thread.ttl_minutes is not None or thread.expires_at is not None:
                    # A second statement: cut off before it, the hint trails, as hints may, and
                    # the thread has no expiry until a turn notes one (module docstring). A note
                    # landed since the insert keeps its greater values; the ttl is the record's.
                    await self._db.execute(
                        f"{NOTED}{KEEP_THE_GREATER}, ttl_minutes = excluded.ttl_minutes",
                        (
                            thread.turns,
                            _key(thread.expires_at),
                            thread.ttl_minutes,
                            thread.project_id,
                            thread.workspace_id,
                            thread.thread_id,
                        ),
                    )
                return thread, True
            stored = await self.get(thread.project_id, thread.workspace_id, thread.thread_id)
            if stored is not None:
                return stored, False
        raise StoreUnavailable(f"the thread {thread.thread_id!r} was deleted during its create")

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        row = await self._db.fetch_one(
            f"{SELECTED} WHERE t.project_id = ? AND t.workspace_id = ? AND t.thread_id = ?",
            (project_id, workspace_id, thread_id),
        )
        return _thread(row) if row is not None else None

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        # The ids as one JSON parameter: however many there are, no limit on bound variables.
        rows = await self._db.fetch_all(
            f"{SELECTED} WHERE t.project_id = ? AND t.workspace_id = ?"
            " AND t.thread_id IN (SELECT value FROM json_each(?))",
            (project_id, workspace_id, json.dumps(thread_ids)),
        )
        found = (_thread(row) for row in rows)
        return {t.thread_id: t for t in found}

    async def note_turn(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        turn: int,
        *,
        expires_at: datetime | None = None,
    ) -> None:
        check_turn(turn)
        # One upsert, the expiry in it when given (and then a tombstone is no source row: left
        # as it is, as on MongoDB). Its ttl is not the note's: a new row has none, a row kept.
        live = f" AND {_live()}" if expires_at is not None else ""
        await self._db.execute(
            f"{NOTED}{live}{KEEP_THE_GREATER}",
            (turn, _key(expires_at), None, project_id, workspace_id, thread_id),
        )

    async def set_ttl(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        ttl_minutes: float | None,
        expires_at: datetime | None,
    ) -> ThreadRecord | None:
        # One upsert of a live thread's activity (a tombstone is no source row: unchanged); then
        # the thread as it is (None: no such thread, or deleted meanwhile).
        await self._db.execute(
            f"{NOTED} AND {_live()} ON CONFLICT (project_id, workspace_id, thread_id)"
            " DO UPDATE SET ttl_minutes = excluded.ttl_minutes, expires_key = excluded.expires_key",
            (0, _key(expires_at), ttl_minutes, project_id, workspace_id, thread_id),
        )
        return await self.get(project_id, workspace_id, thread_id)

    async def expired(self, now: datetime, *, limit: int) -> list[ThreadRecord]:
        check_page(limit, 0)
        # Walks workspace_threads_expiring from the soonest; the thread's row is joined by key.
        # Tombstones too: their expiry is their erasure due (the caller reads ``deleted``).
        rows = await self._db.fetch_all(
            f"SELECT t.body, {ACTIVITY} FROM workspace_thread_activity AS n"
            " JOIN workspace_threads AS t USING (project_id, workspace_id, thread_id)"
            " WHERE n.expires_key IS NOT NULL AND n.expires_key <= ?"
            " ORDER BY n.expires_key LIMIT ?",
            (expiry_key(now), limit),
        )
        return [_thread(row) for row in rows]

    async def set_metadata(
        self, project_id: str, workspace_id: str, thread_id: str, metadata: dict[str, Any]
    ) -> ThreadRecord | None:
        # One statement, writing the metadata only: the rest of the record stays as created, and
        # of concurrent updates the last one wins whole. The JSON as pydantic writes the record.
        # A tombstone keeps its empty metadata: it is returned as it is.
        row = await self._db.fetch_one(
            "UPDATE workspace_threads SET body = json_set(body, '$.metadata', json(?))"
            f" WHERE project_id = ? AND workspace_id = ? AND thread_id = ? AND {_live()}"
            f" RETURNING body, {ACTIVITY_OF_UPDATED}",
            (pydantic_core.to_json(metadata).decode(), project_id, workspace_id, thread_id),
        )
        if row is not None:
            return _thread(row)
        stored = await self.get(project_id, workspace_id, thread_id)
        return stored if stored is not None and stored.deleted else None

    async def mark_deleted(
        self, project_id: str, workspace_id: str, thread_id: str, at: datetime
    ) -> ThreadRecord | None:
        # One statement marks a live thread only, so the first mark's time stays, and its
        # trigger sets the expiry (the erasure due) in it: a tombstone marked before keeps its
        # expiry as it is. Then the thread as it is, marked now or before (None: no such
        # thread, or deleted meanwhile).
        await self._db.execute(
            "UPDATE workspace_threads"
            " SET body = json_set(body, '$.metadata', json('{}'), '$.deleted_at', ?)"
            f" WHERE project_id = ? AND workspace_id = ? AND thread_id = ? AND {_live()}",
            (_deleted_text(at), project_id, workspace_id, thread_id),
        )
        return await self.get(project_id, workspace_id, thread_id)

    async def erasure_done(self, project_id: str, workspace_id: str, thread_id: str) -> None:
        # One statement, of a tombstone's activity only (a live thread's expiry is its ttl's);
        # one already cleared is not written again.
        await self._db.execute(
            "UPDATE workspace_thread_activity SET expires_key = NULL"
            " WHERE project_id = ? AND workspace_id = ? AND thread_id = ?"
            " AND expires_key IS NOT NULL AND EXISTS (SELECT 1 FROM workspace_threads AS t"
            " WHERE t.project_id = workspace_thread_activity.project_id"
            " AND t.workspace_id = workspace_thread_activity.workspace_id"
            " AND t.thread_id = workspace_thread_activity.thread_id"
            " AND json_extract(t.body, '$.deleted_at') IS NOT NULL)",
            (project_id, workspace_id, thread_id),
        )

    async def delete(self, project_id: str, workspace_id: str, thread_id: str) -> bool:
        # The trigger takes the activity in the same statement.
        deleted = await self._db.execute(
            "DELETE FROM workspace_threads"
            " WHERE project_id = ? AND workspace_id = ? AND thread_id = ?",
            (project_id, workspace_id, thread_id),
        )
        return deleted > 0

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        rows = await self._db.fetch_all(
            f"{SELECTED} WHERE t.project_id = ? AND t.workspace_id = ? AND {_live('t.body')}"
            " ORDER BY t.created_key DESC, t.thread_id DESC LIMIT ? OFFSET ?",
            (project_id, workspace_id, limit, offset),
        )
        return [_thread(row) for row in rows]
