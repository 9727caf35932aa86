"""Notification deliveries: one per (execution, suspension, channel), and who sends which attempt.

The notifier enqueues a delivery when it sees ``execution.suspended`` (a redelivered event
enqueues nothing new), polls for deliveries that are due, and before sending attempt ``n`` claims
it. The claim is an insert under a unique id, the one write that is atomic on every
MongoDB-compatible server (FerretDB 1.x runs conditional updates non-atomically), so of several
notifier replicas exactly one sends each attempt. Only the claimer records the outcome.

The whole ``Delivery`` is kept as JSON text (agent data may have keys no server accepts), next to
the fields queries use. Times are copied out as fixed-width UTC ISO strings (microseconds), so
they compare and sort as text the same way in MongoDB, SQLite and memory, and the JSON body keeps
every datetime exactly: a delivery read back equals the one written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now
from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.cursor import InvalidCursor, decode_cursor, encode_cursor

SCHEMA_VERSION = 1
MAX_ATTEMPT = 999_999
"""Attempt numbers are six digits wide in claim ids (see ``claim_id``)."""


class NotificationStore(Protocol):
    async def enqueue(self, delivery: Delivery) -> bool:
        """Store a new delivery unless one with this delivery_id exists (a redelivered
        execution.suspended); True if stored now."""
        ...

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        """Pending deliveries whose next_attempt_at <= now, oldest next_attempt_at first."""
        ...

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        """Reserve attempt number ``attempt`` (1-based) of a delivery: of concurrent claimers
        exactly one gets True, also across processes."""
        ...

    async def record(self, delivery: Delivery) -> None:
        """Store the delivery's new state after an attempt (only the claimer of that attempt
        calls this, so a plain replace is fine)."""
        ...

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None: ...

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        """Oldest first (updated_at, then delivery_id), ``limit`` at a time; ``cursor`` is a
        previous page's next cursor. A cursor this store did not return raises InvalidCursor.
        ``workspaces``: only deliveries of these workspaces (None: all of the project), so a
        page and its cursor never come from a workspace the caller may not see."""
        ...


def time_key(value: datetime) -> str:
    """A time as text that sorts like the time: UTC, fixed width, microseconds."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def claim_id(delivery_id: str, attempt: int) -> str:
    """``<delivery_id>:<attempt>``; the attempt's fixed width keeps two pairs from sharing an id
    (delivery ids contain colons)."""
    if not 1 <= attempt <= MAX_ATTEMPT:
        raise ValueError(f"attempt must be between 1 and {MAX_ATTEMPT}, not {attempt}")
    return f"{delivery_id}:{attempt:06d}"


def list_key(delivery: Delivery) -> tuple[str, str]:
    """Where a delivery sorts in ``list``: (updated_at as ``time_key``, delivery_id)."""
    return time_key(delivery.updated_at), delivery.delivery_id


def page_cursor(page: list[Delivery], more: bool) -> str | None:
    return encode_cursor(*list_key(page[-1])) if more and page else None


def decode_list_cursor(cursor: str) -> tuple[str, str]:
    """The (updated key, delivery id) a page ended at; InvalidCursor for anything else."""
    updated_key, delivery_id = decode_cursor(cursor)
    try:
        valid = time_key(datetime.fromisoformat(updated_key)) == updated_key
    except ValueError:
        valid = False
    if not valid:
        raise InvalidCursor("cursor is not one this API returned")
    return updated_key, delivery_id


class InMemoryNotifications:
    def __init__(self) -> None:
        self._deliveries: dict[str, Delivery] = {}
        self._claims: dict[str, str] = {}

    async def enqueue(self, delivery: Delivery) -> bool:
        if delivery.delivery_id in self._deliveries:
            return False
        self._deliveries[delivery.delivery_id] = delivery
        return True

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        pending = (
            d
            for d in self._deliveries.values()
            if d.status is DeliveryStatus.PENDING and d.next_attempt_at <= now
        )
        return sorted(pending, key=lambda d: (time_key(d.next_attempt_at), d.delivery_id))[:limit]

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        key = claim_id(delivery_id, attempt)
        # No await between the check and the insert: atomic within the event loop.
        if key in self._claims:
            return False
        self._claims[key] = owner
        return True

    async def record(self, delivery: Delivery) -> None:
        self._deliveries[delivery.delivery_id] = delivery

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None:
        found = self._deliveries.get(delivery_id)
        return found if found is not None and found.project_id == project_id else None

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        after = decode_list_cursor(cursor) if cursor else None
        matching = sorted(
            (
                d
                for d in self._deliveries.values()
                if d.project_id == project_id
                and (status is None or d.status is status)
                and (workspaces is None or d.notification.workspace_id in workspaces)
                and (after is None or list_key(d) > after)
            ),
            key=list_key,
        )
        page = matching[:limit]
        return page, page_cursor(page, len(matching) > limit)


Document = dict[str, Any]


def _document(delivery: Delivery) -> Document:
    return {
        "_id": delivery.delivery_id,
        "schema_version": SCHEMA_VERSION,
        "project_id": delivery.project_id,
        "channel": delivery.channel,
        # For listing by workspace; deliveries stored before it was kept show only to keys of
        # every workspace (the safe side).
        "workspace_id": delivery.notification.workspace_id,
        "status": delivery.status.value,
        "next_key": time_key(delivery.next_attempt_at),
        "updated_key": time_key(delivery.updated_at),
        "body": delivery.model_dump_json(),
    }


def _from_document(document: Document) -> Delivery:
    return Delivery.model_validate_json(document["body"])


class MongoNotifications:
    """``notification_deliveries`` (``_id`` = delivery id) and ``notification_claims``
    (``_id`` = ``claim_id``): enqueue and claim are inserts, so a duplicate key is the answer
    "someone else was first" on every server."""

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._deliveries = database["notification_deliveries"]
        self._claims = database["notification_claims"]

    async def ensure_indexes(self) -> None:
        await self._deliveries.create_index(
            [("status", ASCENDING), ("next_key", ASCENDING), ("_id", ASCENDING)], name="by_due"
        )
        await self._deliveries.create_index(
            [
                ("project_id", ASCENDING),
                ("status", ASCENDING),
                ("updated_key", ASCENDING),
                ("_id", ASCENDING),
            ],
            name="by_project_status_updated",
        )
        await self._deliveries.create_index(
            [("project_id", ASCENDING), ("updated_key", ASCENDING), ("_id", ASCENDING)],
            name="by_project_updated",
        )

    async def enqueue(self, delivery: Delivery) -> bool:
        try:
            await self._deliveries.insert_one(_document(delivery))
        except DuplicateKeyError:
            return False
        return True

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        found = (
            self._deliveries.find(
                {"status": DeliveryStatus.PENDING.value, "next_key": {"$lte": time_key(now)}}
            )
            .sort([("next_key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit)
        )
        return [_from_document(d) async for d in found]

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        try:
            await self._claims.insert_one(
                {
                    "_id": claim_id(delivery_id, attempt),
                    "delivery_id": delivery_id,
                    "attempt": attempt,
                    "owner": owner,
                    "claimed_at": utc_now(),
                }
            )
        except DuplicateKeyError:
            return False
        return True

    async def record(self, delivery: Delivery) -> None:
        document = _document(delivery)
        # Only the attempt's claimer writes, so the non-atomic replace of FerretDB 1.x is safe;
        # upsert so a state is never lost, though the delivery was enqueued before its claim.
        await self._deliveries.replace_one({"_id": document["_id"]}, document, upsert=True)

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None:
        found = await self._deliveries.find_one({"_id": delivery_id, "project_id": project_id})
        return _from_document(found) if found is not None else None

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        query: Document = {"project_id": project_id}
        if status is not None:
            query["status"] = status.value
        if workspaces is not None:
            query["workspace_id"] = {"$in": workspaces}
        if cursor:
            after_key, after_id = decode_list_cursor(cursor)
            query["$or"] = [
                {"updated_key": {"$gt": after_key}},
                {"updated_key": after_key, "_id": {"$gt": after_id}},
            ]
        found = (
            self._deliveries.find(query)
            .sort([("updated_key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit + 1)
        )
        items = [_from_document(d) async for d in found]
        page = items[:limit]
        return page, page_cursor(page, len(items) > limit)
