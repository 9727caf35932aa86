"""SQLite adapter of shared/store/erasure.py: one ``DELETE`` per table for a batch of executions.

The ids are one JSON parameter (``json_each``), so a batch of any size binds one variable. Rows
are found by an index: the execution id leads the key of ``executions``, ``decision_claims``,
``attempts`` and ``approvals`` and the index of ``steps``; ``SCHEMA`` adds the two more erasing
needs (progress is keyed by project first, a spent link by its own id). Notification deliveries
and their claims are keyed ``<execution>:<suspension>:<channel>[:<attempt>]``: a range of the key
per execution, which ``:`` ends, so execution ``abc`` never takes ``abc1``'s.

This store has no separate outbox: a delivery still pending is a row of the history, so with
``keep_audit`` it stays, as it would in MongoDB's history (whose start-up adoption queues it
again). Not erased: threads (a tombstone outlives its turns), agent versions and API keys (of no
one execution).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from shared.store.sqlite.database import Database

SCHEMA = """
CREATE INDEX IF NOT EXISTS execution_progress_by_execution
    ON execution_progress (execution_id);
CREATE INDEX IF NOT EXISTS spent_links_by_execution
    ON spent_links (json_extract(body, '$.execution_id'));
"""
"""Indexes for erasing: run after the tables' schemas."""

IDS = "(SELECT value FROM json_each(?))"


def _by_execution(table: str, column: str = "execution_id") -> str:
    return f"DELETE FROM {table} WHERE {column} IN {IDS}"


def _by_prefix(table: str, key: str) -> str:
    # CROSS JOIN keeps the ids outermost: one range of the key's index per id, not a scan.
    return (
        f"DELETE FROM {table} WHERE rowid IN (SELECT r.rowid FROM json_each(?) AS ids"
        f" CROSS JOIN {table} AS r"
        f" WHERE r.{key} >= ids.value || ':' AND r.{key} < ids.value || ';')"
    )


WORKING = (
    _by_execution("steps"),
    _by_execution("attempts"),
    _by_execution("execution_progress"),
)
AUDIT = (
    _by_execution("decision_claims"),
    _by_execution("approvals"),
    _by_prefix("notification_claims", "claim_id"),
    _by_prefix("notification_deliveries", "delivery_id"),
    # A spent link names its execution (and who used it); once the execution is gone no link
    # can decide it, so the record that it was spent guards nothing.
    _by_execution("spent_links", "json_extract(body, '$.execution_id')"),
    # Last: a retry after a crash before it still finds the execution ended, and erases the rest.
    _by_execution("executions"),
)


class SqliteErasure:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def erase(self, execution_ids: Sequence[str], *, keep_audit: bool) -> int:
        ids = list(dict.fromkeys(execution_ids))
        for eid in ids:
            # '|' too, as the MongoDB adapter refuses (its markers' keys end the id with it).
            if not eid or ":" in eid or "|" in eid:
                raise ValueError(f"an execution id cannot be empty or hold ':' or '|': {eid!r}")
        if not ids:
            return 0
        parameter = json.dumps(ids)
        removed = 0
        for statement in WORKING if keep_audit else WORKING + AUDIT:
            removed += await self._db.execute(statement, (parameter,))
        return removed
