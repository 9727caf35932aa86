"""Approvals toward multi-owner decisions on SQLite: one row per (execution, generation,
identity), so a person approving twice counts once. The ``reviewer`` column holds the identity
the approval counts under (``Approval.counted_as``): the name predates identities."""

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
        rows = await self._db.fetch_all(
            "SELECT body FROM approvals WHERE execution_id = ? AND generation = ? ORDER BY rowid",
            (execution_id, generation),
        )
        # Sorted on the parsed time, like the other stores (see SqliteApiKeys.list).
        return sorted(
            (Approval.model_validate_json(row["body"]) for row in rows), key=lambda a: a.at
        )
