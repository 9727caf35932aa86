"""Agents' memory (shared/store/memories.py) on SQLite: one row per item in ``agent_memories``,
keyed by ``item_id``.

A prefix is a range of the index ``agent_memories_found`` (tenant, then ``path``, the labels
joined by ``.``): the namespace itself or below it (``path`` starting with the prefix and a
``.``). Times are ISO text in UTC to the millisecond, which sorts like the time. A put is one
upsert that keeps the row's ``created_at``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

from shared.store.memories import MemoryItem, Namespace, Tenant, item_id, value_of
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_memories (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    path TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    ttl_minutes REAL,
    expires_at TEXT
);
CREATE INDEX IF NOT EXISTS agent_memories_found
    ON agent_memories (project_id, workspace_id, path);
CREATE INDEX IF NOT EXISTS agent_memories_expiring
    ON agent_memories (expires_at) WHERE expires_at IS NOT NULL;
"""

BATCH = 200
"""Rows read per query while a search is iterated."""


def _text(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat(timespec="milliseconds")


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _item(row: sqlite3.Row) -> MemoryItem:
    return MemoryItem(
        tenant=Tenant(row["project_id"], row["workspace_id"]),
        namespace=tuple(json.loads(row["namespace"])),
        key=row["key"],
        value=value_of(row["value"]),
        created_at=_time(row["created_at"]),
        updated_at=_time(row["updated_at"]),
        ttl_minutes=row["ttl_minutes"],
        expires_at=_time(row["expires_at"]),
    )


def _under(prefix: Namespace) -> tuple[str, tuple[str | int, ...]]:
    """The condition (after the tenant's) and its parameters for the rows under ``prefix``."""
    if not prefix:
        return "", ()
    path = ".".join(prefix)
    return " AND (path = ? OR substr(path, 1, ?) = ?)", (path, len(path) + 1, path + ".")


class SqliteMemories:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def ensure_indexes(self) -> None:
        await self._db.execute_script(SCHEMA)

    async def put(self, item: MemoryItem) -> None:
        await self._db.execute(
            "INSERT INTO agent_memories (id, project_id, workspace_id, path, namespace, key,"
            " value, created_at, updated_at, ttl_minutes, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at, ttl_minutes = excluded.ttl_minutes,"
            " expires_at = excluded.expires_at",
            (
                item_id(item.tenant, item.namespace, item.key),
                *item.tenant,
                ".".join(item.namespace),
                json.dumps(list(item.namespace)),
                item.key,
                item.value_json(),
                _text(item.created_at),
                _text(item.updated_at),
                item.ttl_minutes,
                _text(item.expires_at),
            ),
        )

    async def get(self, tenant: Tenant, namespace: Namespace, key: str) -> MemoryItem | None:
        row = await self._db.fetch_one(
            "SELECT * FROM agent_memories WHERE id = ?", (item_id(tenant, namespace, key),)
        )
        return None if row is None else _item(row)

    async def delete(self, tenant: Tenant, namespace: Namespace, key: str) -> None:
        await self._db.execute(
            "DELETE FROM agent_memories WHERE id = ?", (item_id(tenant, namespace, key),)
        )

    async def search(
        self, tenant: Tenant, prefix: Namespace, *, at_most: int | None
    ) -> AsyncIterator[MemoryItem]:
        condition, parameters = _under(prefix)
        read = 0
        while at_most is None or read < at_most:
            size = BATCH if at_most is None else min(BATCH, at_most - read)
            rows = await self._db.fetch_all(
                "SELECT * FROM agent_memories WHERE project_id = ? AND workspace_id = ?"
                f"{condition} ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
                (*tenant, *parameters, size, read),
            )
            for row in rows:
                yield _item(row)
            read += len(rows)
            if len(rows) < size:
                return

    async def namespace_expiries(
        self, tenant: Tenant, prefix: Namespace
    ) -> list[tuple[Namespace, datetime | None]]:
        condition, parameters = _under(prefix)
        rows = await self._db.fetch_all(
            "SELECT namespace, expires_at FROM agent_memories"
            f" WHERE project_id = ? AND workspace_id = ?{condition}",
            (*tenant, *parameters),
        )
        return [(tuple(json.loads(r["namespace"])), _time(r["expires_at"])) for r in rows]

    async def refresh(self, items: Sequence[MemoryItem]) -> None:
        await self._db.execute_many(
            "UPDATE agent_memories SET expires_at = ? WHERE id = ?",
            [(_text(i.expires_at), item_id(i.tenant, i.namespace, i.key)) for i in items],
        )

    async def expire(self, now: datetime, *, limit: int) -> int:
        return await self._db.execute(
            "DELETE FROM agent_memories WHERE id IN (SELECT id FROM agent_memories"
            " WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?)",
            (_text(now), limit),
        )
