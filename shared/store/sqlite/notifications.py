"""Notification deliveries and attempt claims on SQLite (see shared/store/notifications.py).

One table holds every delivery: the poll's ``status = 'pending' AND next_key <= ?`` is a range
of the ``by_due`` index, which starts with the status, so it reads the pending rows only, however
many delivered and dead ones the table holds (SQLite uses its indexes, unlike FerretDB 1.x,
which is why the MongoDB adapter keeps pending deliveries in an outbox collection instead).
Every write is one statement, atomic: there is no state between two writes to repair."""

from __future__ import annotations

from datetime import datetime

from shared.events import utc_now
from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.notifications import claim_id, decode_list_cursor, page_cursor, time_key
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS notification_deliveries (
    delivery_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    status TEXT NOT NULL,
    next_key TEXT NOT NULL,
    updated_key TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notification_deliveries_by_due
    ON notification_deliveries (status, next_key, delivery_id);
CREATE INDEX IF NOT EXISTS notification_deliveries_by_project_status_updated
    ON notification_deliveries (project_id, status, updated_key, delivery_id);
CREATE INDEX IF NOT EXISTS notification_deliveries_by_project_updated
    ON notification_deliveries (project_id, updated_key, delivery_id);

CREATE TABLE IF NOT EXISTS notification_claims (
    claim_id TEXT PRIMARY KEY,
    delivery_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    owner TEXT NOT NULL,
    claimed_at TEXT NOT NULL
);
"""

DUE = (
    "SELECT body FROM notification_deliveries WHERE status = ? AND next_key <= ?"
    " ORDER BY next_key, delivery_id LIMIT ?"
)
"""The poll: a range of ``notification_deliveries_by_due`` (tests/unit/test_sqlite_bounded_reads.py
checks SQLite's plan)."""


def _row(delivery: Delivery) -> tuple[str, str, str, str, str, str, str]:
    """delivery_id, project_id, channel, status, next_key, updated_key, body."""
    return (
        delivery.delivery_id,
        delivery.project_id,
        delivery.channel,
        delivery.status.value,
        time_key(delivery.next_attempt_at),
        time_key(delivery.updated_at),
        delivery.model_dump_json(),
    )


class SqliteNotifications:
    """One row per delivery and one per claimed attempt. Enqueue and claim are an ``INSERT ...
    ON CONFLICT DO NOTHING`` under a primary key: SQLite runs it under the file's write lock, so
    of claimers in any number of processes exactly one inserts the row."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def enqueue(self, delivery: Delivery) -> bool:
        inserted = await self._db.execute(
            "INSERT INTO notification_deliveries (delivery_id, project_id, channel, status,"
            " next_key, updated_key, body) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            _row(delivery),
        )
        return inserted == 1

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        rows = await self._db.fetch_all(DUE, (DeliveryStatus.PENDING.value, time_key(now), limit))
        return [Delivery.model_validate_json(row["body"]) for row in rows]

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        inserted = await self._db.execute(
            "INSERT INTO notification_claims (claim_id, delivery_id, attempt, owner, claimed_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (claim_id(delivery_id, attempt), delivery_id, attempt, owner, utc_now().isoformat()),
        )
        return inserted == 1

    async def record(self, delivery: Delivery) -> None:
        if delivery.status is DeliveryStatus.PENDING:
            # Only while it is pending: a replica that took this attempt over may have finished
            # the delivery (this one was frozen past the lost-claim takeover).
            await self._db.execute(
                "UPDATE notification_deliveries SET next_key = ?, updated_key = ?, body = ?"
                " WHERE delivery_id = ? AND status = ?",
                (
                    time_key(delivery.next_attempt_at),
                    time_key(delivery.updated_at),
                    delivery.model_dump_json(),
                    delivery.delivery_id,
                    DeliveryStatus.PENDING.value,
                ),
            )
            return
        await self._db.execute(
            "INSERT INTO notification_deliveries (delivery_id, project_id, channel, status,"
            " next_key, updated_key, body) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (delivery_id) DO UPDATE SET project_id = excluded.project_id,"
            " channel = excluded.channel, status = excluded.status,"
            " next_key = excluded.next_key, updated_key = excluded.updated_key,"
            " body = excluded.body",
            _row(delivery),
        )

    async def latest(self, delivery_id: str) -> Delivery | None:
        row = await self._db.fetch_one(
            "SELECT body FROM notification_deliveries WHERE delivery_id = ?", (delivery_id,)
        )
        return Delivery.model_validate_json(row["body"]) if row is not None else None

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None:
        row = await self._db.fetch_one(
            "SELECT body FROM notification_deliveries WHERE delivery_id = ? AND project_id = ?",
            (delivery_id, project_id),
        )
        return Delivery.model_validate_json(row["body"]) if row is not None else None

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        conditions = ["project_id = ?"]
        params: list[str | int] = [project_id]
        if status is not None:
            conditions.append("status = ?")
            params.append(status.value)
        if workspaces is not None:
            marks = ", ".join("?" * len(workspaces))
            conditions.append(f"json_extract(body, '$.notification.workspace_id') IN ({marks})")
            params.extend(workspaces)
        if cursor:
            conditions.append("(updated_key, delivery_id) > (?, ?)")
            params.extend(decode_list_cursor(cursor))
        rows = await self._db.fetch_all(
            f"SELECT body FROM notification_deliveries WHERE {' AND '.join(conditions)}"
            " ORDER BY updated_key, delivery_id LIMIT ?",
            (*params, limit + 1),
        )
        items = [Delivery.model_validate_json(row["body"]) for row in rows]
        page = items[:limit]
        return page, page_cursor(page, len(items) > limit)
