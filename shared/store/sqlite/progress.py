"""Progress of running executions on SQLite (see shared/store/progress.py)."""

from __future__ import annotations

import json

from shared.events import utc_now
from shared.store.progress import PROGRESS_PAGE, PROGRESS_TTL, ProgressEntry
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS execution_progress (
    project_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (project_id, execution_id, key)
);
CREATE INDEX IF NOT EXISTS execution_progress_by_created ON execution_progress (created_at);
"""


class SqliteProgressLog:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        now = utc_now().timestamp()
        await self._db.execute_many(
            "INSERT INTO execution_progress (project_id, execution_id, key, kind, data,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(project_id, execution_id, e.key, e.kind, json.dumps(e.data), now) for e in entries],
        )

    async def after(
        self, project_id: str, execution_id: str, key: str, *, limit: int = PROGRESS_PAGE
    ) -> list[ProgressEntry]:
        rows = await self._db.fetch_all(
            "SELECT key, kind, data FROM execution_progress"
            " WHERE project_id = ? AND execution_id = ? AND key > ? ORDER BY key LIMIT ?",
            (project_id, execution_id, key, limit),
        )
        return [
            ProgressEntry(key=row["key"], kind=row["kind"], data=json.loads(row["data"]))
            for row in rows
        ]

    async def expire(self) -> None:
        """Delete entries older than PROGRESS_TTL: SQLite has no TTL index to do it."""
        oldest_kept = (utc_now() - PROGRESS_TTL).timestamp()
        await self._db.execute(
            "DELETE FROM execution_progress WHERE created_at < ?", (oldest_kept,)
        )
