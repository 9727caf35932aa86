"""``GET .../notifications``: how telling reviewers went: delivered, pending, or dead (with the
reason), per channel. Dead deliveries are the ones an operator has to look at."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from services.gateway.auth import ANY_ROLE, access
from services.gateway.cursors import CursorScope, PageCursors
from services.gateway.openapi import PROBLEM_RESPONSES
from shared.events import Identifier
from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.notifications import NotificationStore


class DeliveryView(BaseModel):
    delivery_id: str
    channel: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    updated_at: datetime
    execution_id: str
    workspace_id: str
    suspension_id: int

    @classmethod
    def of(cls, delivery: Delivery) -> DeliveryView:
        notification = delivery.notification
        return cls(
            delivery_id=delivery.delivery_id,
            channel=delivery.channel,
            status=delivery.status,
            attempts=delivery.attempts,
            next_attempt_at=delivery.next_attempt_at,
            last_error=delivery.last_error,
            updated_at=delivery.updated_at,
            execution_id=notification.execution_id,
            workspace_id=notification.workspace_id,
            suspension_id=notification.suspension_id,
        )


class DeliveryPage(BaseModel):
    items: list[DeliveryView]
    next_cursor: str | None


def build_notifications_router(
    store: NotificationStore, keys: ApiKeys, cursors: PageCursors
) -> APIRouter:
    router = APIRouter(responses=PROBLEM_RESPONSES)
    reader = Depends(access(keys, "reading", ANY_ROLE))

    @router.get(
        "/api/v1/projects/{project_id}/notifications",
        response_model=DeliveryPage,
        tags=["notifications"],
    )
    async def list_deliveries(
        project_id: Identifier,
        status: Annotated[DeliveryStatus | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=1024)] = None,
        key: ApiKey = reader,
    ) -> DeliveryPage:
        """The project's notification deliveries, oldest first; ``status=dead`` lists the ones
        given up on, with the reason. A key limited to some workspaces sees theirs only."""
        scope = CursorScope.of(
            "notifications", project_id, key, status=status.value if status else None
        )
        items, next_cursor = await store.list(
            project_id,
            status=status,
            limit=limit,
            cursor=cursors.open(cursor, scope),
            workspaces=key.workspaces,
        )
        return DeliveryPage(
            items=[DeliveryView.of(d) for d in items],
            next_cursor=cursors.seal(next_cursor, scope),
        )

    return router
