from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.eventually import eventually

pytestmark = pytest.mark.e2e


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed end-to-end test reports what the services logged: without it a timeout in CI
    says only that a status never came."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name, value in funcargs.items():
        if isinstance(value, Cluster):
            report.sections.append((f"services of fixture {name!r}", value.diagnostics()))


PROJECT = "proj-e2e"
WORKSPACE = "ws-e2e"


@pytest.fixture(scope="session")
async def cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    running = Cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path_factory.mktemp("cluster")
    )
    async with running.serving():
        yield running


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[Api]:
    """An owner of PROJECT (every workspace) talking to the gateway."""
    secret = await cluster.key(PROJECT)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=cluster.base_url, timeout=20, headers=headers) as client:
        yield Api(client)


class Api:
    """The HTTP calls the tests make, with the Atlas paths spelled once."""

    def __init__(
        self, client: httpx.AsyncClient, project: str = PROJECT, workspace: str = WORKSPACE
    ):
        self.client = client
        self.project = project
        self.workspace = workspace

    async def invoke(
        self, agent: str = "refund-approval", message: str = "Refund claim CLM-4821", **extra: Any
    ) -> httpx.Response:
        return await self.client.post(
            f"/api/v1/projects/{self.project}/workspaces/{self.workspace}/invoke",
            json={"agent": agent, "message": message, **extra},
        )

    async def get(self, execution_id: str) -> httpx.Response:
        return await self.client.get(
            f"/api/v1/projects/{self.project}/executions/{execution_id}",
            params={"workspace_id": self.workspace},
        )

    async def audit(self, execution_id: str) -> httpx.Response:
        return await self.client.get(
            f"/api/v1/projects/{self.project}/executions/{execution_id}/audit",
            params={"workspace_id": self.workspace},
        )

    async def resume(
        self, execution_id: str, body: Any = None, *, content: bytes | None = None
    ) -> httpx.Response:
        url = f"/api/v1/projects/{self.project}/executions/{execution_id}/resume"
        params = {"workspace_id": self.workspace}
        if content is not None:
            return await self.client.post(
                url, params=params, content=content, headers={"content-type": "application/json"}
            )
        return await self.client.post(url, params=params, json=body)

    async def status_of(self, execution_id: str) -> dict[str, Any]:
        response = await self.get(execution_id)
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def wait_for(
        self, execution_id: str, *statuses: str, timeout: float = 60
    ) -> dict[str, Any]:
        return await eventually(
            lambda: self.status_of(execution_id),
            lambda body: body["status"] in statuses,
            timeout=timeout,
            what=f"{execution_id} to become {'/'.join(statuses)}",
        )

    async def wait_for_suspension(
        self, execution_id: str, *, after: int, timeout: float = 60
    ) -> dict[str, Any]:
        """Wait for a suspension newer than ``after`` (an execution that suspends again)."""
        return await eventually(
            lambda: self.status_of(execution_id),
            lambda body: body["status"] == "suspended" and body["suspension_id"] > after,
            timeout=timeout,
            what=f"{execution_id} to suspend again after suspension {after}",
        )

    async def start_suspended(
        self, agent: str = "refund-approval", message: str = "Refund claim CLM-4821"
    ) -> dict[str, Any]:
        response = await self.invoke(agent, message)
        assert response.status_code == 202, response.text
        return await self.wait_for(response.json()["execution_id"], "suspended")


def ledger_entries(cluster: Cluster, execution_id: str) -> list[dict[str, Any]]:
    from agents.ledger import read_all

    return [e for e in read_all(Path(cluster.ledger)) if e["execution_id"] == execution_id]
