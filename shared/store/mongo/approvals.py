"""MongoDB adapter of shared/store/approvals.py."""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.approvals import Approval, approval_id


class MongoApprovals:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["approvals"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index([("execution_id", 1), ("generation", 1)])

    async def record(self, approval: Approval) -> Approval:
        document = {"_id": approval_id(approval), **approval.model_dump(mode="json")}
        try:
            await self._collection.insert_one(document)
            return approval
        except DuplicateKeyError:
            stored = await self._collection.find_one({"_id": document["_id"]})
            if stored is None:
                raise
            return Approval.model_validate({k: v for k, v in stored.items() if k != "_id"})

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        found = self._collection.find({"execution_id": execution_id, "generation": generation})
        approvals = [
            Approval.model_validate({k: v for k, v in d.items() if k != "_id"}) async for d in found
        ]
        return sorted(approvals, key=lambda a: a.at)
