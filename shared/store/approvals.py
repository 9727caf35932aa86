"""Approvals toward a decision that needs several owners (separation of duties).

One document per (execution, generation, identity): a person approving twice, or once by API
key and once by a notification link, counts once, and the insert under that ``_id`` is atomic on
every server. The decision goes ahead when enough distinct identities gave the same answer
(compared by ``answer_key``) with keys that are still valid then.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

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

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        """The generation's approvals, oldest first. Read on every approving decision and every
        GET of a suspension that needs several, so it reads that generation's approvals only,
        never every approval ever given (MongoDB: numbered slots read by ``_id``)."""
        ...


def approval_id(approval: Approval) -> str:
    return f"{approval.execution_id}:{approval.generation}:{approval.counted_as}"
