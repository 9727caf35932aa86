"""MongoDB adapter of shared/store/notifications.py.

Three collections, every hot read and write by ``_id`` (the delivery id, or a claim id):

- ``notification_deliveries``: every delivery ever made, its latest state (the history the API
  lists; it grows with every suspension, so nothing periodic reads it);
- ``notification_outbox``: the deliveries still pending, each with its current state: the
  notifier's poll reads this one only, so an idle poll is one query over nothing;
- ``notification_claims``: one per attempt made (``claim_id``).

Only inserts are atomic on FerretDB, so no write spans the two collections; their order makes
every crash in between harmless:

- **enqueue**: outbox entry, then history. A crash in between leaves the delivery in the outbox
  only: it is sent, and its first ``record`` writes the history (an upsert). A redelivered event
  re-inserts the outbox entry of a delivery that has since finished (the history insert is then
  the one that fails): that entry is deleted again at once, and should the process die first,
  its attempt's claim is taken already, so it is never sent, and ``latest`` deletes it.
- **a retry** (still pending): outbox, then history; the history may lag by one attempt after a
  crash, never lead. An outbox entry that is gone means another replica finished the delivery:
  nothing is written.
- **an outcome** (delivered, dead): history, then the outbox entry is deleted. A crash in between
  leaves it listed as due at an attempt whose claim is taken: never sent again; ``latest`` sees
  the history and deletes the entry.

So a delivery pending in the history always has its outbox entry, except those stored by a
version without the outbox: ``ensure_indexes`` copies those in (one scan of the history at
start-up, not per poll).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now
from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.notifications import claim_id, decode_list_cursor, page_cursor, time_key

SCHEMA_VERSION = 1

Document = dict[str, Any]
PENDING = DeliveryStatus.PENDING.value


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


def _outbox_document(delivery: Delivery) -> Document:
    return {
        "_id": delivery.delivery_id,
        "schema_version": SCHEMA_VERSION,
        "next_key": time_key(delivery.next_attempt_at),
        "body": delivery.model_dump_json(),
    }


def _from_document(document: Document) -> Delivery:
    return Delivery.model_validate_json(document["body"])


async def _insert(collection: AsyncCollection[Document], document: Document) -> bool:
    try:
        await collection.insert_one(document)
    except DuplicateKeyError:
        return False
    return True


class MongoNotifications:
    """Enqueue and claim are inserts, so a duplicate key is the answer "someone else was first"
    on every server."""

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._deliveries = database["notification_deliveries"]
        self._outbox = database["notification_outbox"]
        self._claims = database["notification_claims"]

    async def ensure_indexes(self) -> None:
        # MongoDB serves the poll's sort from it (FerretDB 1.x scans the outbox: it is small).
        await self._outbox.create_index(
            [("next_key", ASCENDING), ("_id", ASCENDING)], name="by_due"
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
        await self.adopt_pending()

    async def adopt_pending(self) -> int:
        """Give every delivery pending in the history its outbox entry (those enqueued by a
        version without the outbox); return how many were missing. One scan of the history:
        for start-up, never for a poll."""
        adopted = 0
        async for document in self._deliveries.find({"status": PENDING}):
            adopted += await _insert(self._outbox, _outbox_document(_from_document(document)))
        return adopted

    async def enqueue(self, delivery: Delivery) -> bool:
        if delivery.status is not DeliveryStatus.PENDING:  # stored finished: history only
            return await _insert(self._deliveries, _document(delivery))
        queued = await _insert(self._outbox, _outbox_document(delivery))
        stored = await _insert(self._deliveries, _document(delivery))
        if queued and not stored:
            # A redelivered event of a delivery whose outbox entry had gone: it has finished
            # (or was stored by a version without the outbox). Put the outbox right.
            known = await self._deliveries.find_one({"_id": delivery.delivery_id})
            if known is not None and known["status"] == PENDING:
                await self._outbox.replace_one(
                    {"_id": known["_id"]}, _outbox_document(_from_document(known))
                )
            else:
                await self._outbox.delete_one({"_id": delivery.delivery_id})
        return stored

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        found = (
            self._outbox.find({"next_key": {"$lte": time_key(now)}})
            .sort([("next_key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit)
        )
        return [_from_document(d) async for d in found]

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        return await _insert(
            self._claims,
            {
                "_id": claim_id(delivery_id, attempt),
                "delivery_id": delivery_id,
                "attempt": attempt,
                "owner": owner,
                "claimed_at": utc_now(),
            },
        )

    async def record(self, delivery: Delivery) -> None:
        if delivery.status is DeliveryStatus.PENDING:
            # Only the attempt's claimer writes, so FerretDB's non-atomic replace is safe. No
            # outbox entry: a replica that took this attempt over (this one was frozen past the
            # lost-claim takeover) has finished the delivery: a retry state must not revive it.
            replaced = await self._outbox.replace_one(
                {"_id": delivery.delivery_id}, _outbox_document(delivery)
            )
            if replaced.matched_count == 0:
                return
            await self._store_history(delivery)
            return
        await self._store_history(delivery)
        await self._outbox.delete_one({"_id": delivery.delivery_id})

    async def _store_history(self, delivery: Delivery) -> None:
        # By _id alone (FerretDB scans for any other filter); an upsert, in case the enqueue
        # that made the outbox entry died before writing the history.
        await self._deliveries.replace_one(
            {"_id": delivery.delivery_id}, _document(delivery), upsert=True
        )

    async def latest(self, delivery_id: str) -> Delivery | None:
        queued = await self._outbox.find_one({"_id": delivery_id})
        known = await self._deliveries.find_one({"_id": delivery_id})
        if queued is None:
            return _from_document(known) if known else None
        current = _from_document(queued)
        if known is None:  # its enqueue died before writing the history: pending, as queued
            return current
        stored = _from_document(known)
        if stored.status is not DeliveryStatus.PENDING:
            # Finished: the entry outlived a crash after the outcome was written. Its next
            # attempt's claim is taken, so it was never sent again; now it is not listed either.
            await self._outbox.delete_one({"_id": delivery_id})
            return stored
        if stored.attempts > current.attempts:
            # Further along in the history: attempted by a version without the outbox.
            await self._outbox.replace_one({"_id": delivery_id}, _outbox_document(stored))
            return stored
        return current

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None:
        # By _id alone (FerretDB scans for any other filter), then the project checked here.
        found = await self._deliveries.find_one({"_id": delivery_id})
        if found is None or found.get("project_id") != project_id:
            return None
        return _from_document(found)

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        # An API call, paged: it may query the history (the poll never does).
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
