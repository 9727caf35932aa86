"""Threads (shared/store/threads.py) on SQLite: one row per (project, thread), inserted once.

Listing a workspace is a range of ``threads_by_workspace``, read backwards: its columns are the
filter's, then the order's."""

from __future__ import annotations

import json

from shared.store.sqlite.database import Database
from shared.store.threads import ThreadRecord, check_page, created_key

SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    project_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_key TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (project_id, thread_id)
);
CREATE INDEX IF NOT EXISTS threads_by_workspace
    ON threads (project_id, workspace_id, created_key, thread_id);
"""


class SqliteThreads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        inserted = await self._db.execute(
            "INSERT INTO threads (project_id, thread_id, workspace_id, created_key, body)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                thread.project_id,
                thread.thread_id,
                thread.workspace_id,
                created_key(thread),
                thread.model_dump_json(),
            ),
        )
        if inserted:
            return thread, True
        stored = await self.get(thread.project_id, thread.thread_id)
        if stored is None:  # threads are never deleted: a bug, not a race
            raise RuntimeError(f"the thread {thread.thread_id!r} vanished after a conflict")
        return stored, False

    async def get(self, project_id: str, thread_id: str) -> ThreadRecord | None:
        row = await self._db.fetch_one(
            "SELECT body FROM threads WHERE project_id = ? AND thread_id = ?",
            (project_id, thread_id),
        )
        return ThreadRecord.model_validate_json(row["body"]) if row is not None else None

    async def get_many(self, project_id: str, thread_ids: list[str]) -> dict[str, ThreadRecord]:
        # The ids as one JSON parameter: however many there are, no limit on bound variables.
        rows = await self._db.fetch_all(
            "SELECT body FROM threads WHERE project_id = ?"
            " AND thread_id IN (SELECT value FROM json_each(?))",
            (project_id, json.dumps(thread_ids)),
        )
        found = (ThreadRecord.model_validate_json(row["body"]) for row in rows)
        return {t.thread_id: t for t in found}

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        rows = await self._db.fetch_all(
            "SELECT body FROM threads WHERE project_id = ? AND workspace_id = ?"
            " ORDER BY created_key DESC, thread_id DESC LIMIT ? OFFSET ?",
            (project_id, workspace_id, limit, offset),
        )
        return [ThreadRecord.model_validate_json(row["body"]) for row in rows]
