"""Executions and decision claims on SQLite."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from shared.domain.execution import Execution, ExecutionStatus, next_deadline, undelivered
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.ports import Claim, Page, Written
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_key TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS executions_by_scope_status_created
    ON executions (project_id, workspace_id, status, created_key, execution_id);
-- The sweeps' and the gauges' reads by status alone (suspended, pending, the live ones): a
-- seek, not a scan of every execution's row (20 ms at 10,000 executions, on the event loop).
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status);

CREATE TABLE IF NOT EXISTS decision_claims (
    execution_id TEXT NOT NULL,
    suspension_id INTEGER NOT NULL,
    decision_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (execution_id, suspension_id)
);
"""


PARSED_KEPT = 1_000
"""Executions kept parsed (``Parsed``): a list page of 200 and every execution in flight."""


class Parsed:
    """Executions by the JSON they are stored as, the most recently used kept: parsing one
    (pydantic, a few KB) costs tens of microseconds, and the same unchanged executions are read
    again and again (a client polling a list, each hop of an execution reading the version the
    one before wrote). A stored JSON text is one version of one execution, whoever wrote it, so
    the text is the key: no version can be answered for another. Executions are frozen, and the
    in-memory store hands out its instances the same way."""

    def __init__(self, kept: int = PARSED_KEPT) -> None:
        self._kept = kept
        self._items: OrderedDict[str, Execution] = OrderedDict()

    def __call__(self, body: str) -> Execution:
        found = self._items.get(body)
        if found is not None:
            self._items.move_to_end(body)
            return found
        execution = Execution.model_validate_json(body)
        self.remember(body, execution)
        return execution

    def remember(self, body: str, execution: Execution) -> None:
        self._items[body] = execution
        self._items.move_to_end(body)
        if len(self._items) > self._kept:
            self._items.popitem(last=False)


def _row(execution: Execution) -> tuple[str, str, str, str, int, str, str]:
    """execution_id, project_id, workspace_id, status, version, created_key, body."""
    return (
        execution.execution_id,
        execution.project_id,
        execution.workspace_id,
        execution.status.value,
        execution.version,
        # The same sort key as the other stores, so a cursor means the same page in each.
        execution.created_at.isoformat(),
        execution.model_dump_json(),
    )


class SqliteExecutionStore:
    """One row per execution holding its latest version.

    The compare-and-set is an ``UPDATE ... WHERE version = <expected>``: SQLite runs one
    statement at a time against the file, so of concurrent writers exactly one finds the
    expected version and changes the row; the others change nothing and are told so.
    """

    def __init__(self, database: Database) -> None:
        self._db = database
        self._parsed = Parsed()

    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        first = execution.model_copy(update={"version": 1})
        values = _row(first)
        inserted = await self._db.execute(
            "INSERT INTO executions (execution_id, project_id, workspace_id, status, version,"
            " created_key, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (execution_id) DO NOTHING",
            values,
        )
        if inserted:
            self._parsed.remember(values[-1], first)
            return first, True
        # Executions are never deleted, so the one that was in the way is still there.
        row = await self._db.fetch_one(
            "SELECT body FROM executions WHERE execution_id = ?", (execution.execution_id,)
        )
        if row is None:
            raise RuntimeError(f"execution {execution.execution_id} vanished after a conflict")
        return self._parsed(row["body"]), False

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        row = await self._db.fetch_one(
            "SELECT body FROM executions WHERE execution_id = ? AND project_id = ?",
            (execution_id, project_id),
        )
        return self._parsed(row["body"]) if row is not None else None

    async def replace(self, current: Execution, successor: Execution) -> Execution | None:
        if successor.execution_id != current.execution_id:
            raise ValueError("a successor must be of the same execution")
        stored = successor.model_copy(update={"version": current.version + 1})
        values = _row(stored)
        execution_id, *columns = values
        changed = await self._db.execute(
            "UPDATE executions SET project_id = ?, workspace_id = ?, status = ?, version = ?,"
            " created_key = ?, body = ? WHERE execution_id = ? AND version = ?",
            (*columns, execution_id, current.version),
        )
        if changed != 1:
            return None
        self._parsed.remember(values[-1], stored)
        return stored

    async def compare_and_set(self, current: Execution, successor: Execution) -> Written | None:
        stored = await self.replace(current, successor)  # one statement: nothing follows it
        return None if stored is None else Written(stored)

    async def mark_waiting(self, execution: Execution) -> None:
        return None  # the sweeps read the executions themselves

    async def unchanged_since(self, execution_id: str, version: int) -> bool:
        row = await self._db.fetch_one(
            "SELECT version FROM executions WHERE execution_id = ?", (execution_id,)
        )
        return row is not None and int(row["version"]) == version

    async def due_deadlines(self, now: datetime, *, limit: int = 100) -> list[Execution]:
        # The dev store holds few suspended executions: read them and pick in Python rather
        # than keep a deadline column in step with the body.
        rows = await self._db.fetch_all(
            "SELECT body FROM executions WHERE status = ?", (ExecutionStatus.SUSPENDED.value,)
        )
        due = []
        for row in rows:
            execution = self._parsed(row["body"])
            at = next_deadline(execution)
            if at is not None and at <= now:
                due.append((at, execution))
        return [e for _, e in sorted(due, key=lambda pair: pair[0])][:limit]

    async def undelivered_before(self, cutoff: datetime, *, limit: int = 100) -> list[Execution]:
        # Rare (a broker outage's leftovers): read the pending ones and pick in Python.
        rows = await self._db.fetch_all(
            "SELECT body FROM executions WHERE status = ?", (ExecutionStatus.PENDING.value,)
        )
        pending = [self._parsed(row["body"]) for row in rows]
        return undelivered(pending, cutoff, limit)

    async def count_live_by_status(self) -> dict[ExecutionStatus, int]:
        live = [s.value for s in ExecutionStatus if not s.is_terminal]
        rows = await self._db.fetch_all(
            "SELECT status, COUNT(*) AS n FROM executions"
            f" WHERE status IN ({', '.join('?' * len(live))}) GROUP BY status",
            tuple(live),
        )
        return {ExecutionStatus(row["status"]): int(row["n"]) for row in rows}

    async def list(
        self,
        project_id: str,
        workspace_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        conditions = ["project_id = ?", "workspace_id = ?"]
        params: list[str | int] = [project_id, workspace_id]
        if status is not None:
            conditions.append("status = ?")
            params.append(status.value)
        if cursor:
            conditions.append("(created_key, execution_id) > (?, ?)")
            params.extend(decode_cursor(cursor))
        rows = await self._db.fetch_all(
            f"SELECT body FROM executions WHERE {' AND '.join(conditions)}"
            " ORDER BY created_key, execution_id LIMIT ?",
            (*params, limit + 1),
        )
        items = [self._parsed(row["body"]) for row in rows]
        page, more = items[:limit], len(items) > limit
        next_cursor = None
        if more and page:
            last = page[-1]
            next_cursor = encode_cursor(last.created_at.isoformat(), last.execution_id)
        return Page(page, next_cursor)


class SqliteDecisionClaims:
    """One row per suspension; its primary key makes a second claim impossible."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def claim(self, execution_id: str, suspension_id: int, claim: Claim) -> Claim:
        key = (execution_id, suspension_id)
        inserted = await self._db.execute(
            "INSERT INTO decision_claims (execution_id, suspension_id, decision_id, payload)"
            " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (*key, claim.decision_id, claim.payload),
        )
        if inserted:
            return claim
        holder = await self.holder(execution_id, suspension_id)
        if holder is None:  # claims are never deleted: a bug, not a race
            raise RuntimeError(f"the claim on {key} vanished after a conflict")
        return holder

    async def holder(self, execution_id: str, suspension_id: int) -> Claim | None:
        row = await self._db.fetch_one(
            "SELECT decision_id, payload FROM decision_claims"
            " WHERE execution_id = ? AND suspension_id = ?",
            (execution_id, suspension_id),
        )
        return (
            None if row is None else Claim(decision_id=row["decision_id"], payload=row["payload"])
        )
