"""Approvals toward multi-owner decisions on SQLite: one row per (execution, generation,
identity), so a person approving twice counts once. The ``reviewer`` column holds the identity
the approval counts under (``Approval.counted_as``): the name predates identities.

Listing a generation is a range of the primary key, whose first columns are the execution and
the generation: it reads that generation's rows only, however many the table holds (SQLite uses
its indexes; the MongoDB adapter reads numbered slots by ``_id`` for FerretDB, which does not)."""

from __future__ import annotations

from shared.store.approvals import Approval
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS approvals (
    execution_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    reviewer TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (execution_id, generation, reviewer)
);
"""

LIST = "SELECT body FROM approvals WHERE execution_id = ? AND generation = ? ORDER BY rowid"
"""A range of the primary key (tests/unit/test_sqlite_bounded_reads.py checks SQLite's plan)."""


class SqliteApprovals:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def record(self, approval: Approval) -> Approval:
        key = (approval.execution_id, approval.generation, approval.counted_as)
        inserted = await self._db.execute(
            "INSERT INTO approvals (execution_id, generation, reviewer, body)"
            " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (*key, approval.model_dump_json()),
        )
        if inserted:
            return approval
        row = await self._db.fetch_one(
            "SELECT body FROM approvals WHERE execution_id = ? AND generation = ? AND reviewer = ?",
            key,
        )
        if row is None:  # approvals are never deleted: a bug, not a race
            raise RuntimeError(f"the approval {key} vanished after a conflict")
        return Approval.model_validate_json(row["body"])

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        rows = await self._db.fetch_all(LIST, (execution_id, generation))
        # Sorted on the parsed time, like the other stores (see SqliteApiKeys.list).
        return sorted(
            (Approval.model_validate_json(row["body"]) for row in rows), key=lambda a: a.at
        )
