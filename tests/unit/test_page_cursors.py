"""Page cursors carry nothing a key may not see (issue 17, finding 5): the same contract on every
paged route of the API, checked through the gateway on the in-memory store."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.domain.execution import new_pending_execution
from shared.events import AgentInput, ExecutionRequested
from shared.notifications.model import Delivery, Notification
from shared.store.api_keys import Role, create_key
from shared.store.memory import InMemoryStore

PROJECT = "p1"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Discard:
    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        return None

    def add_listener(self, topic: str, listener: object) -> None:
        """Nothing is ever heard: these tests open no execution stream."""


@dataclass(frozen=True)
class PagedRoute:
    """One paged route: where it is, and how to fill it with items of a workspace."""

    name: str
    path: str
    params: dict[str, str]
    fill: Callable[[InMemoryStore, str, int], Any]
    item_id: str
    a_status: str
    """A valid value of the route's ``status`` filter."""


async def executions_of(store: InMemoryStore, workspace: str, n: int) -> None:
    event = ExecutionRequested(
        execution_id=f"{workspace}-exec-{n}",
        project_id=PROJECT,
        workspace_id=workspace,
        agent="refund-approval",
        input=AgentInput(message="refund"),
    )
    execution = new_pending_execution(event, None).model_copy(
        update={"created_at": T0 + timedelta(seconds=n)}
    )
    await store.executions.create(execution)


async def deliveries_of(store: InMemoryStore, workspace: str, n: int) -> None:
    execution_id = f"{workspace}-exec-{n}"
    notification = Notification(
        notification_id=f"{execution_id}:1:mail",
        project_id=PROJECT,
        workspace_id=workspace,
        execution_id=execution_id,
        agent="refund-approval",
        suspension_id=1,
        review_url="http://gateway/reviews",
    )
    await store.notifications.enqueue(
        Delivery(
            delivery_id=notification.notification_id,
            project_id=PROJECT,
            channel="mail",
            notification=notification,
            next_attempt_at=T0,
            updated_at=T0 + timedelta(seconds=n),
        )
    )


ROUTES = [
    PagedRoute(
        "executions",
        f"/api/v1/projects/{PROJECT}/executions",
        {"workspace_id": "ws-a"},
        executions_of,
        "execution_id",
        "suspended",
    ),
    PagedRoute(
        "notifications",
        f"/api/v1/projects/{PROJECT}/notifications",
        {},
        deliveries_of,
        "delivery_id",
        "pending",
    ),
]


@dataclass
class Gateway:
    http: httpx.AsyncClient
    store: InMemoryStore
    keys: dict[str, str]

    async def get(self, who: str, route: PagedRoute, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.keys[who]}"}
        return await self.http.get(route.path, params={**route.params, **params}, headers=headers)


@pytest.fixture
async def gateway(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    store = InMemoryStore()
    keys = {}
    for who, workspaces in (("owner", None), ("confined", ["ws-a"]), ("other", None)):
        _, keys[who] = await create_key(
            store.api_keys, project_id=PROJECT, role=Role.OWNER, name=who, workspaces=workspaces
        )
    app = create_app(GatewaySettings(topic_prefix="mem."), store=store, publisher=Discard())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield Gateway(http, store, keys)


def decoded(cursor: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return b""


async def pages(gateway: Gateway, who: str, route: PagedRoute) -> tuple[list[str], list[str]]:
    seen: list[str] = []
    cursors: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        response = await gateway.get(who, route, **params)
        assert response.status_code == 200, response.text
        body = response.json()
        seen += [item[route.item_id] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen, cursors
        cursors.append(cursor)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
async def test_a_cursor_is_opaque_and_pages_only_what_the_key_may_see(
    gateway: Gateway, route: PagedRoute
) -> None:
    for n in range(3):
        await route.fill(gateway.store, "ws-a", 2 * n)
        await route.fill(gateway.store, "ws-b", 2 * n + 1)
    seen, cursors = await pages(gateway, "confined", route)
    assert all(item.startswith("ws-a-") for item in seen) and len(seen) == 3
    assert len(cursors) == 2
    for cursor in cursors:
        for leak in (b"ws-a", b"ws-b", b"exec", b"2026"):
            assert leak not in cursor.encode() and leak not in decoded(cursor)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
async def test_a_cursor_opens_only_for_its_key_route_and_filters(
    gateway: Gateway, route: PagedRoute
) -> None:
    for n in range(3):
        await route.fill(gateway.store, "ws-a", n)
    _, [cursor, *_] = await pages(gateway, "owner", route)
    other_route = next(r for r in ROUTES if r is not route)
    attempts = [
        await gateway.get("other", route, limit=1, cursor=cursor),  # another key
        await gateway.get("owner", other_route, limit=1, cursor=cursor),  # another route
        await gateway.get("owner", route, limit=1, cursor=cursor, status=route.a_status),
        await gateway.get("owner", route, limit=1, cursor=cursor[:-4] + "AAAA"),  # altered
        await gateway.get("owner", route, limit=1, cursor="not-a-cursor"),
    ]
    for response in attempts:
        assert response.status_code == 400, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"].endswith("/invalid-cursor")
    again = await gateway.get("owner", route, limit=1, cursor=cursor)
    assert again.status_code == 200 and len(again.json()["items"]) == 1
