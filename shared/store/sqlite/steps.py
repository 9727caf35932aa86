"""Durable step results and the attempt ledger (the sandbox's fencing tokens) on SQLite."""

from __future__ import annotations

from shared.events import utc_now
from shared.store.attempts import owner_name
from shared.store.ports import StepRecord
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS steps (
    key TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS steps_by_execution ON steps (execution_id);

CREATE TABLE IF NOT EXISTS attempts (
    execution_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    owner TEXT NOT NULL,
    started_at TEXT NOT NULL,
    PRIMARY KEY (execution_id, epoch, attempt)
);
"""


class SqliteStepStore:
    """One row per durable step under its key: the first insert stores the record, the
    others change nothing and read it back."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        rows = await self._db.fetch_all(
            "SELECT key, body FROM steps WHERE execution_id = ?", (execution_id,)
        )
        return {row["key"]: StepRecord.model_validate_json(row["body"]) for row in rows}

    async def get(self, key: str) -> StepRecord | None:
        row = await self._db.fetch_one("SELECT body FROM steps WHERE key = ?", (key,))
        return None if row is None else StepRecord.model_validate_json(row["body"])

    async def put(self, record: StepRecord) -> StepRecord:
        inserted = await self._db.execute(
            "INSERT INTO steps (key, execution_id, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (record.key, record.execution_id, record.model_dump_json()),
        )
        if inserted:
            return record
        row = await self._db.fetch_one("SELECT body FROM steps WHERE key = ?", (record.key,))
        if row is None:  # steps are never deleted: a bug, not a race
            raise RuntimeError(f"step {record.key} vanished after a conflict")
        return StepRecord.model_validate_json(row["body"])


class SqliteAttemptLedger:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def begin(self, execution_id: str, epoch: int) -> int:
        # Numbering and inserting in one statement: SQLite holds the write lock from the read
        # of the latest number to the insert, so two replicas never take the same number.
        rows = await self._db.fetch_all(
            "INSERT INTO attempts (execution_id, epoch, attempt, owner, started_at)"
            " SELECT ?, ?, COALESCE(MAX(attempt), 0) + 1, ?, ? FROM attempts"
            " WHERE execution_id = ? AND epoch = ? RETURNING attempt",
            (execution_id, epoch, owner_name(), utc_now().isoformat(), execution_id, epoch),
        )
        return int(rows[0]["attempt"])

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        later = await self._db.fetch_one(
            "SELECT 1 FROM attempts WHERE execution_id = ? AND epoch = ? AND attempt > ?",
            (execution_id, epoch, attempt),
        )
        return later is not None
