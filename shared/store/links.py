"""Spent notification links: a link decides once (shared/notifications/action_links.py).

The first POST of a link spends it, whatever the decision's outcome, by inserting its random id
under a unique ``_id`` (the one atomic write every server has); a second POST finds it spent.
Documents are small and few (one per link a person actually used), so nothing prunes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

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
