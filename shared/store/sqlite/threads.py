"""Threads (shared/store/threads.py) on SQLite: one row per (project, workspace, thread), inserted
once, in ``workspace_threads``.

Listing a workspace is a range of ``workspace_threads_listed``, read backwards: its columns are
the filter's, then the order's.

The previous release's table, ``threads``, was keyed by (project, thread). The schema script moves
its rows into ``workspace_threads`` under the workspace each was created in, at every start-up
(the one process of ``interlock dev`` runs it before it serves): an insert that skips what is
there already, then a delete, so a start cut off between the two repeats both harmlessly. The
emptied table is kept for the script to read from.
"""

from __future__ import annotations

import json

from shared.store.sqlite.database import Database
from shared.store.threads import ThreadRecord, check_page, created_key

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
"""


class SqliteThreads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        inserted = await self._db.execute(
            "INSERT INTO workspace_threads"
            " (project_id, workspace_id, thread_id, created_key, body)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                thread.project_id,
                thread.workspace_id,
                thread.thread_id,
                created_key(thread),
                thread.model_dump_json(),
            ),
        )
        if inserted:
            return thread, True
        stored = await self.get(thread.project_id, thread.workspace_id, thread.thread_id)
        if stored is None:  # threads are never deleted: a bug, not a race
            raise RuntimeError(f"the thread {thread.thread_id!r} vanished after a conflict")
        return stored, False

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        row = await self._db.fetch_one(
            "SELECT body FROM workspace_threads"
            " WHERE project_id = ? AND workspace_id = ? AND thread_id = ?",
            (project_id, workspace_id, thread_id),
        )
        return ThreadRecord.model_validate_json(row["body"]) if row is not None else None

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        # The ids as one JSON parameter: however many there are, no limit on bound variables.
        rows = await self._db.fetch_all(
            "SELECT body FROM workspace_threads WHERE project_id = ? AND workspace_id = ?"
            " AND thread_id IN (SELECT value FROM json_each(?))",
            (project_id, workspace_id, json.dumps(thread_ids)),
        )
        found = (ThreadRecord.model_validate_json(row["body"]) for row in rows)
        return {t.thread_id: t for t in found}

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        rows = await self._db.fetch_all(
            "SELECT body FROM workspace_threads WHERE project_id = ? AND workspace_id = ?"
            " ORDER BY created_key DESC, thread_id DESC LIMIT ? OFFSET ?",
            (project_id, workspace_id, limit, offset),
        )
        return [ThreadRecord.model_validate_json(row["body"]) for row in rows]
