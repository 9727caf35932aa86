"""The HTTP calls the harness makes, as a reviewer's tooling would (the Atlas paths)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

AGENT = "bench-pipeline"


class BenchClient:
    def __init__(self, base_url: str, key: str, *, project: str, workspace: str) -> None:
        self.project = project
        self.workspace = workspace
        # Open-loop load may have hundreds of requests in flight; the pool must not be what
        # queues them (the harness would then measure itself).
        self._http = httpx.AsyncClient(
            base_url=base_url,
            timeout=120,
            headers={"Authorization": f"Bearer {key}"},
            # A connection idle for as long as the server keeps it (uvicorn's 5 s, httpx's
            # default expiry too) can be closed by the server as a request goes out on it: the
            # request then fails (httpx.ReadError). Dropped sooner here, it never is.
            limits=httpx.Limits(
                max_connections=256, max_keepalive_connections=256, keepalive_expiry=2.0
            ),
        )

    async def invoke(
        self, message: str, *, agent: str = AGENT, session_id: str | None = None
    ) -> str:
        """Start an execution; with ``session_id``, the session's next turn."""
        body: dict[str, Any] = {"agent": agent, "message": message}
        if session_id is not None:
            body["session_id"] = session_id
        response = await self._http.post(
            f"/api/v1/projects/{self.project}/workspaces/{self.workspace}/invoke", json=body
        )
        response.raise_for_status()
        return str(response.json()["execution_id"])

    async def approve(self, execution_id: str) -> None:
        response = await self._http.post(
            f"/api/v1/projects/{self.project}/executions/{execution_id}/resume",
            params={"workspace_id": self.workspace},
            json={"decision": "approve"},
        )
        response.raise_for_status()

    async def get(self, execution_id: str) -> dict[str, Any]:
        response = await self._http.get(
            f"/api/v1/projects/{self.project}/executions/{execution_id}",
            params={"workspace_id": self.workspace},
        )
        response.raise_for_status()
        return dict(response.json())

    async def ids_with_status(self, status: str) -> list[str]:
        """Every execution of the workspace in ``status`` (all pages)."""
        ids: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"workspace_id": self.workspace, "status": status}
            params["limit"] = 200
            if cursor:
                params["cursor"] = cursor
            response = await self._http.get(
                f"/api/v1/projects/{self.project}/executions", params=params
            )
            response.raise_for_status()
            page = response.json()
            ids.extend(str(item["execution_id"]) for item in page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                return ids

    @contextlib.asynccontextmanager
    async def changes(self) -> AsyncIterator[AsyncIterator[tuple[str, str]]]:
        """The workspace's changes as the gateway pushes them (``GET .../changes``, server-sent
        events), as (execution id, status): open once the block is entered."""
        async with self._http.stream(
            "GET",
            f"/api/v1/projects/{self.project}/changes",
            params={"workspace_id": self.workspace},
            timeout=httpx.Timeout(120, read=None),
        ) as response:
            response.raise_for_status()
            yield _changes_in(response.aiter_lines())

    async def aclose(self) -> None:
        await self._http.aclose()


async def _changes_in(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(execution id, status) of each ``change`` event of a server-sent events stream."""
    event = None
    async for line in lines:
        if line.startswith("event:"):
            event = line.partition(":")[2].strip()
        elif line.startswith("data:") and event == "change":
            view = json.loads(line.partition(":")[2])
            yield str(view["execution_id"]), str(view["status"])
        elif not line:
            event = None
