"""Spent notification links: a link decides once (shared/notifications/action_links.py).

The first POST of a link spends it, whatever the decision's outcome, by inserting its random id
under a unique ``_id`` (the one atomic write every server has); a second POST finds it spent.
Documents are small and few (one per link a person actually used), so nothing prunes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now


class LinkUse(BaseModel):
    """Who used which link, on what: kept as the record that the link is spent."""

    model_config = ConfigDict(frozen=True)

    link_id: str
    execution_id: str
    generation: int
    recipient: str
    decision: str
    at: datetime = Field(default_factory=utc_now)


class SpentLinks(Protocol):
    async def spend(self, use: LinkUse) -> bool:
        """Spend the link: True the first time, False when it was spent already."""
        ...

    async def spent(self, link_id: str) -> bool: ...


class InMemorySpentLinks:
    def __init__(self) -> None:
        self._uses: dict[str, LinkUse] = {}

    async def spend(self, use: LinkUse) -> bool:
        return self._uses.setdefault(use.link_id, use) is use

    async def spent(self, link_id: str) -> bool:
        return link_id in self._uses


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
