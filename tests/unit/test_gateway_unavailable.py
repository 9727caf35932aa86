"""A database or broker that does not answer is a 503 with Retry-After, never a 500 or a hang."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from fastapi.testclient import TestClient
from pydantic import BaseModel
from pymongo.errors import ServerSelectionTimeoutError

from services.gateway.app import GatewaySettings, create_app
from shared.store.api_keys import Role, create_key
from shared.store.memory import InMemoryStore


class UnreachableDatabase(InMemoryStore):
    """Fault injection: every execution read or write fails as if MongoDB were down."""

    def __init__(self) -> None:
        super().__init__()

        async def fail(*_: Any, **__: Any) -> Any:
            raise ServerSelectionTimeoutError("127.0.0.1:27017: connection refused")

        for name in ("create", "get", "replace", "list"):
            setattr(self.executions, name, fail)
        self.api_keys.get = fail  # type: ignore[method-assign]


class UnreachableBroker:
    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        raise KafkaTimeoutError()

    def add_listener(self, topic: str, listener: object) -> None:
        """Nothing is ever heard: these tests open no execution stream."""


@pytest.mark.parametrize(
    ("store", "publisher"),
    [(UnreachableDatabase(), UnreachableBroker()), (InMemoryStore(), UnreachableBroker())],
    ids=["database-down", "broker-down"],
)
def test_dependency_down_is_503_with_retry_after(
    store: InMemoryStore, publisher: UnreachableBroker
) -> None:
    _, secret = asyncio.run(create_key(store.api_keys, project_id="p", role=Role.OWNER, name="t"))
    app = create_app(GatewaySettings(environment="test"), store=store, publisher=publisher)
    with TestClient(app) as client:
        response = client.post(
            "/api/v1/projects/p/workspaces/w/invoke",
            json={"agent": "refund-approval", "message": "CLM-4821"},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "5"
        assert response.json()["type"].endswith("/service-unavailable")
