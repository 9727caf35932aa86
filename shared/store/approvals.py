"""Approvals toward a decision that needs several owners (separation of duties).

One document per (execution, generation, identity): a person approving twice, or once by API
key and once by a notification link, counts once, and the insert under that ``_id`` is atomic on
every server. The decision goes ahead when enough distinct identities gave the same answer
(compared by ``answer_key``) with keys that are still valid then.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now


class Approval(BaseModel):
    model_config = ConfigDict(frozen=True)

    execution_id: str
    generation: int
    reviewer: str
    """How the audit trail names who approved (the key, or the link and its recipient)."""
    identity: str | None = None
    """Who approved, for counting (shared/domain/principals.py); None in approvals stored before
    identities were recorded, where the reviewer stands in."""
    key_id: str | None = None
    """The API key that approved: re-checked for revocation when the quorum completes."""
    via_link: bool = False
    answer_key: str
    """A digest of the answer: approvals count together only for the same answer."""
    summary: str
    reviewer_notes: str | None = None
    at: datetime = Field(default_factory=utc_now)

    @property
    def counted_as(self) -> str:
        """The identity a quorum counts this approval under."""
        return self.identity or self.reviewer


class ApprovalStore(Protocol):
    async def record(self, approval: Approval) -> Approval:
        """Store the approval for this generation; a second one by the same identity is not
        stored and the first is returned."""
        ...

    async def list(self, execution_id: str, generation: int) -> list[Approval]: ...


def _approval_id(approval: Approval) -> str:
    return f"{approval.execution_id}:{approval.generation}:{approval.counted_as}"


class InMemoryApprovals:
    def __init__(self) -> None:
        self._approvals: dict[str, Approval] = {}

    async def record(self, approval: Approval) -> Approval:
        return self._approvals.setdefault(_approval_id(approval), approval)

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        found = [
            a
            for a in self._approvals.values()
            if a.execution_id == execution_id and a.generation == generation
        ]
        return sorted(found, key=lambda a: a.at)


class MongoApprovals:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["approvals"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index([("execution_id", 1), ("generation", 1)])

    async def record(self, approval: Approval) -> Approval:
        document = {"_id": _approval_id(approval), **approval.model_dump(mode="json")}
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
