"""Agents' memory (shared/store/memories.py) on MongoDB: one document per item in
``agent_memories``, ``_id`` = ``item_id``.

A put is one ``update_one`` with upsert, by ``_id``, that sets everything but ``created_at``
(``$setOnInsert``): last writer wins, as in LangGraph's stores. Two first puts of one key at
once may both try the insert; the loser's ``DuplicateKeyError`` is answered by its update again,
now of the document that exists. The value is JSON text (``value``), never document keys.

An item is found under a prefix by one equality on ``paths``, the ``prefix_path`` of each
prefix of its namespace (``index_paths``): a multikey index in MongoDB, and the leading field of
the index, so FerretDB (as ``infra/`` patches it) reads it through its GIN companion rather
than the whole collection. A search reads that index's order, latest update first, in batches
as it is iterated. ``namespace_expiries`` reads two fields of each item. The sweep (``expire``)
reads the index ``expiring`` and deletes by ``_id``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.memories import (
    MemoryItem,
    Namespace,
    Tenant,
    index_paths,
    item_id,
    prefix_path,
    value_of,
)

Document = dict[str, Any]
BATCH = 200
"""Documents a search's cursor reads per batch."""


def _item(document: Document) -> MemoryItem:
    return MemoryItem(
        tenant=Tenant(document["project_id"], document["workspace_id"]),
        namespace=tuple(document["namespace"]),
        key=document["key"],
        value=value_of(document["value"]),
        created_at=document["created_at"],
        updated_at=document["updated_at"],
        ttl_minutes=document.get("ttl_minutes"),
        expires_at=document.get("expires_at"),
    )


class MongoMemories:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["agent_memories"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index(
            [("paths", ASCENDING), ("updated_at", DESCENDING), ("_id", ASCENDING)], name="found"
        )
        await self._collection.create_index([("expires_at", ASCENDING)], name="expiring")

    async def put(self, item: MemoryItem) -> None:
        fields: Document = {
            "project_id": item.tenant.project_id,
            "workspace_id": item.tenant.workspace_id,
            "namespace": list(item.namespace),
            "paths": index_paths(item.tenant, item.namespace),
            "key": item.key,
            "value": item.value_json(),
            "updated_at": item.updated_at,
            "ttl_minutes": item.ttl_minutes,
            "expires_at": item.expires_at,
        }
        update = {"$set": fields, "$setOnInsert": {"created_at": item.created_at}}
        where = {"_id": item_id(item.tenant, item.namespace, item.key)}
        try:
            await self._collection.update_one(where, update, upsert=True)
        except DuplicateKeyError:
            await self._collection.update_one(where, update, upsert=True)

    async def get(self, tenant: Tenant, namespace: Namespace, key: str) -> MemoryItem | None:
        found = await self._collection.find_one({"_id": item_id(tenant, namespace, key)})
        return None if found is None else _item(found)

    async def delete(self, tenant: Tenant, namespace: Namespace, key: str) -> None:
        await self._collection.delete_one({"_id": item_id(tenant, namespace, key)})

    async def search(
        self, tenant: Tenant, prefix: Namespace, *, at_most: int | None
    ) -> AsyncIterator[MemoryItem]:
        cursor = self._collection.find(
            {"paths": prefix_path(tenant, prefix)},
            sort=[("updated_at", DESCENDING), ("_id", ASCENDING)],
            limit=at_most or 0,
            batch_size=min(at_most or BATCH, BATCH),
        )
        try:
            async for document in cursor:
                yield _item(document)
        finally:
            await cursor.close()

    async def namespace_expiries(
        self, tenant: Tenant, prefix: Namespace
    ) -> list[tuple[Namespace, datetime | None]]:
        cursor = self._collection.find(
            {"paths": prefix_path(tenant, prefix)}, {"namespace": 1, "expires_at": 1, "_id": 0}
        )
        return [(tuple(d["namespace"]), d.get("expires_at")) async for d in cursor]

    async def refresh(self, items: Sequence[MemoryItem]) -> None:
        if items:
            await self._collection.bulk_write(
                [
                    UpdateOne(
                        {"_id": item_id(i.tenant, i.namespace, i.key)},
                        {"$set": {"expires_at": i.expires_at}},
                    )
                    for i in items
                ],
                ordered=False,
            )

    async def expire(self, now: datetime, *, limit: int) -> int:
        due = [
            document["_id"]
            async for document in self._collection.find(
                {"expires_at": {"$lte": now}}, {"_id": 1}, sort=[("expires_at", 1)], limit=limit
            )
        ]
        if not due:
            return 0
        deleted = await self._collection.delete_many(
            {"_id": {"$in": due}, "expires_at": {"$lte": now}}
        )
        return deleted.deleted_count
