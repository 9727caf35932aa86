"""MongoDB adapter of shared/store/links.py."""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.links import LinkUse


class MongoSpentLinks:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["spent_links"]

    async def spend(self, use: LinkUse) -> bool:
        document = use.model_dump(mode="json")
        document["_id"] = document.pop("link_id")
        try:
            await self._collection.insert_one(document)
        except DuplicateKeyError:
            return False
        return True

    async def spent(self, link_id: str) -> bool:
        return await self._collection.find_one({"_id": link_id}, {"_id": 1}) is not None
