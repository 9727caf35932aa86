"""In-memory adapter of shared/store/notifications.py: the history, and the pending deliveries
apart (as on MongoDB), so a poll looks at what is pending only."""

from __future__ import annotations

from datetime import datetime

from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.notifications import claim_id, decode_list_cursor, list_key, page_cursor, time_key


class InMemoryNotifications:
    def __init__(self) -> None:
        self._deliveries: dict[str, Delivery] = {}
        self._pending: dict[str, Delivery] = {}
        self._claims: dict[str, str] = {}

    async def enqueue(self, delivery: Delivery) -> bool:
        if delivery.delivery_id in self._deliveries:
            return False
        self._deliveries[delivery.delivery_id] = delivery
        if delivery.status is DeliveryStatus.PENDING:
            self._pending[delivery.delivery_id] = delivery
        return True

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        ready = (d for d in self._pending.values() if d.next_attempt_at <= now)
        return sorted(ready, key=lambda d: (time_key(d.next_attempt_at), d.delivery_id))[:limit]

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        key = claim_id(delivery_id, attempt)
        # No await between the check and the insert: atomic within the event loop.
        if key in self._claims:
            return False
        self._claims[key] = owner
        return True

    async def record(self, delivery: Delivery) -> None:
        if delivery.status is DeliveryStatus.PENDING:
            if delivery.delivery_id not in self._pending:
                return  # finished meanwhile by a replica that took the attempt over
            self._pending[delivery.delivery_id] = delivery
        else:
            self._pending.pop(delivery.delivery_id, None)
        self._deliveries[delivery.delivery_id] = delivery

    async def latest(self, delivery_id: str) -> Delivery | None:
        return self._pending.get(delivery_id) or self._deliveries.get(delivery_id)

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None:
        found = self._deliveries.get(delivery_id)
        return found if found is not None and found.project_id == project_id else None

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        after = decode_list_cursor(cursor) if cursor else None
        matching = sorted(
            (
                d
                for d in self._deliveries.values()
                if d.project_id == project_id
                and (status is None or d.status is status)
                and (workspaces is None or d.notification.workspace_id in workspaces)
                and (after is None or list_key(d) > after)
            ),
            key=list_key,
        )
        page = matching[:limit]
        return page, page_cursor(page, len(matching) > limit)
