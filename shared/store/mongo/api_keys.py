"""MongoDB adapter of shared/store/api_keys.py."""

from __future__ import annotations

import contextlib
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now
from shared.store.api_keys import ApiKey


class MongoApiKeys:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["api_keys"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index([("project_id", 1), ("created_at", 1)])

    async def add(self, key: ApiKey) -> None:
        document = key.model_dump(mode="json")
        document["_id"] = document.pop("key_id")
        # A concurrent add of the same key inserted it first (two gateways creating the dev key).
        with contextlib.suppress(DuplicateKeyError):
            await self._collection.update_one(
                {"_id": document["_id"]}, {"$setOnInsert": document}, upsert=True
            )

    async def get(self, key_id: str) -> ApiKey | None:
        document = await self._collection.find_one({"_id": key_id})
        return _key(document) if document else None

    async def list(self, project_id: str) -> list[ApiKey]:
        found = self._collection.find({"project_id": project_id}).sort("created_at", 1)
        return [_key(d) async for d in found]

    async def revoke(self, project_id: str, key_id: str) -> bool:
        result = await self._collection.update_one(
            {"_id": key_id, "project_id": project_id, "revoked_at": None},
            {"$set": {"revoked_at": utc_now().isoformat()}},
        )
        if result.matched_count:
            return True
        return (
            await self._collection.find_one({"_id": key_id, "project_id": project_id}) is not None
        )


def _key(document: dict[str, Any]) -> ApiKey:
    data = {k: v for k, v in document.items() if k != "_id"}
    return ApiKey.model_validate({**data, "key_id": document["_id"]})
