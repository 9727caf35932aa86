"""Crons (shared/store/crons.py) on SQLite: a row per cron in ``crons``, a row per tick fired in
``cron_ticks``.

Every field of a cron is a column, so ``set_fields`` is one update of the named columns and no
other. Times are ISO text in UTC to the millisecond, which sorts like the time; the payload and
the metadata are JSON text. The sweep reads ``crons_due`` (the enabled crons by next run) and
``cron_ticks_unstarted`` (a partial index of the claims not yet started). A claim is an insert
under its id, which a second claim of the tick fails.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from shared.store.crons import CronRecord, CronSort, Tenant, TickClaim, checked_fields
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS crons (
    cron_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    thread_id TEXT,
    schedule TEXT NOT NULL,
    timezone TEXT,
    end_time TEXT,
    enabled INTEGER NOT NULL,
    payload TEXT NOT NULL,
    metadata TEXT NOT NULL,
    on_run_completed TEXT,
    catch_up TEXT NOT NULL,
    multitask_strategy TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    requester_identity TEXT,
    next_run_date TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS crons_listed ON crons (project_id, workspace_id, created_at);
CREATE INDEX IF NOT EXISTS crons_due ON crons (next_run_date) WHERE enabled = 1;
CREATE TABLE IF NOT EXISTS cron_ticks (
    claim_id TEXT PRIMARY KEY,
    cron_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    tick TEXT NOT NULL,
    execution_id TEXT,
    thread_id TEXT NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    started INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS cron_ticks_of ON cron_ticks (cron_id, tick);
CREATE INDEX IF NOT EXISTS cron_ticks_unstarted ON cron_ticks (claimed_at) WHERE started = 0;
CREATE INDEX IF NOT EXISTS cron_ticks_started ON cron_ticks (claimed_at) WHERE started = 1;
"""

JSON_COLUMNS = ("payload", "metadata")
CRON_COLUMNS = tuple(CronRecord.model_fields)
CLAIM_COLUMNS = tuple(TickClaim.model_fields)
ORDER = {
    "cron_id": "cron_id",
    "assistant_id": "assistant_id",
    "thread_id": "COALESCE(thread_id, '')",
    "next_run_date": "next_run_date",
    "created_at": "created_at",
}


def _column(value: Any) -> Any:
    """A field's value as its column holds it."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds")
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, bool):
        return int(value)
    return value


def _cron(row: sqlite3.Row) -> CronRecord:
    fields = dict(row)
    for name in JSON_COLUMNS:
        fields[name] = json.loads(fields[name])
    fields["enabled"] = bool(fields["enabled"])
    return CronRecord.model_validate(fields)


def _claim(row: sqlite3.Row) -> TickClaim:
    return TickClaim.model_validate({**dict(row), "started": bool(row["started"])})


def _filter(
    tenant: Tenant, assistant_id: str | None, thread_id: str | None, enabled: bool | None
) -> tuple[str, list[Any]]:
    where = ["project_id = ?", "workspace_id = ?"]
    parameters: list[Any] = list(tenant)
    for column, value in (("assistant_id", assistant_id), ("thread_id", thread_id)):
        if value is not None:
            where.append(f"{column} = ?")
            parameters.append(value)
    if enabled is not None:
        where.append("enabled = ?")
        parameters.append(int(enabled))
    return " AND ".join(where), parameters


class SqliteCrons:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def create(self, cron: CronRecord) -> bool:
        values = [_column(getattr(cron, name)) for name in CRON_COLUMNS]
        inserted = await self._db.execute(
            f"INSERT INTO crons ({', '.join(CRON_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(CRON_COLUMNS))}) ON CONFLICT (cron_id) DO NOTHING",
            values,
        )
        return inserted == 1

    async def get(self, tenant: Tenant, cron_id: str) -> CronRecord | None:
        row = await self._db.fetch_one(
            "SELECT * FROM crons WHERE cron_id = ? AND project_id = ? AND workspace_id = ?",
            (cron_id, *tenant),
        )
        return None if row is None else _cron(row)

    async def set_fields(self, tenant: Tenant, cron_id: str, fields: dict[str, Any]) -> bool:
        checked_fields(fields)
        if not fields:
            return await self.get(tenant, cron_id) is not None
        names = sorted(fields)
        assignments = ", ".join(f"{name} = ?" for name in names)
        updated = await self._db.execute(
            f"UPDATE crons SET {assignments}"
            " WHERE cron_id = ? AND project_id = ? AND workspace_id = ?",
            [_column(fields[name]) for name in names] + [cron_id, *tenant],
        )
        return updated == 1

    async def delete(self, tenant: Tenant, cron_id: str) -> bool:
        deleted = await self._db.execute(
            "DELETE FROM crons WHERE cron_id = ? AND project_id = ? AND workspace_id = ?",
            (cron_id, *tenant),
        )
        return deleted == 1

    async def search(
        self,
        tenant: Tenant,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: CronSort = "created_at",
        descending: bool = True,
    ) -> list[CronRecord]:
        where, parameters = _filter(tenant, assistant_id, thread_id, enabled)
        direction = "DESC" if descending else "ASC"
        rows = await self._db.fetch_all(
            f"SELECT * FROM crons WHERE {where}"
            f" ORDER BY {ORDER[sort_by]} {direction}, cron_id {direction} LIMIT ? OFFSET ?",
            (*parameters, limit, offset),
        )
        return [_cron(row) for row in rows]

    async def count(
        self, tenant: Tenant, *, assistant_id: str | None = None, thread_id: str | None = None
    ) -> int:
        where, parameters = _filter(tenant, assistant_id, thread_id, None)
        row = await self._db.fetch_one(f"SELECT COUNT(*) AS n FROM crons WHERE {where}", parameters)
        return 0 if row is None else int(row["n"])

    async def due(self, now: datetime, *, limit: int = 100) -> list[CronRecord]:
        rows = await self._db.fetch_all(
            "SELECT * FROM crons WHERE enabled = 1 AND next_run_date <= ?"
            " ORDER BY next_run_date, cron_id LIMIT ?",
            (_column(now), limit),
        )
        return [_cron(row) for row in rows]

    async def claim_tick(self, claim: TickClaim) -> bool:
        inserted = await self._db.execute(
            f"INSERT INTO cron_ticks ({', '.join(CLAIM_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(CLAIM_COLUMNS))}) ON CONFLICT (claim_id) DO NOTHING",
            [_column(getattr(claim, name)) for name in CLAIM_COLUMNS],
        )
        return inserted == 1

    async def mark_started(self, claim_id: str, execution_id: str | None = None) -> None:
        await self._db.execute(
            "UPDATE cron_ticks SET started = 1, execution_id = COALESCE(?, execution_id)"
            " WHERE claim_id = ?",
            (execution_id, claim_id),
        )

    async def forget_claims(self, claimed_before: datetime, *, limit: int = 100) -> int:
        return await self._db.execute(
            "DELETE FROM cron_ticks WHERE claim_id IN (SELECT claim_id FROM cron_ticks"
            " WHERE started = 1 AND claimed_at < ? ORDER BY claimed_at, claim_id LIMIT ?)",
            (_column(claimed_before), limit),
        )

    async def unstarted(self, claimed_before: datetime, *, limit: int = 100) -> list[TickClaim]:
        rows = await self._db.fetch_all(
            "SELECT * FROM cron_ticks WHERE started = 0 AND claimed_at < ?"
            " ORDER BY claimed_at, claim_id LIMIT ?",
            (_column(claimed_before), limit),
        )
        return [_claim(row) for row in rows]

    async def claims_of(
        self, tenant: Tenant, cron_id: str, *, newest: int | None = None
    ) -> Sequence[TickClaim]:
        rows = await self._db.fetch_all(
            "SELECT * FROM cron_ticks WHERE cron_id = ? AND project_id = ? AND workspace_id = ?"
            " ORDER BY tick DESC LIMIT ?",
            (cron_id, *tenant, -1 if newest is None else newest),
        )
        return [_claim(row) for row in reversed(rows)]
