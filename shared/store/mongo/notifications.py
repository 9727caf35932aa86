"""MongoDB adapter of shared/store/notifications.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now
from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.notifications import claim_id, decode_list_cursor, page_cursor, time_key

SCHEMA_VERSION = 1

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
