"""The execution stream against the four services on real Kafka and FerretDB: live events up to
the interrupt, a disconnect, a decision taken meanwhile, and a reconnect with Last-Event-ID that
gets exactly the events missed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from interlock.client.api import Gateway, Json, moved_on, settled
from interlock.client.config import Config
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e

Event = tuple[str, str, Any]


async def read_until(
    api: Api, execution_id: str, last_kind: str, last_event_id: str | None = None
) -> list[Event]:
    url = f"/api/v1/projects/{api.project}/executions/{execution_id}/stream"
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    events: list[Event] = []
    async with aconnect_sse(
        api.client, "GET", url, params={"workspace_id": api.workspace}, headers=headers
    ) as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for event in source.aiter_sse():
            if event.data:
                events.append((event.event, event.id, json.loads(event.data)))
            if event.event == last_kind:
                break
    return events


async def test_a_client_follows_an_execution_live_and_resumes_after_a_disconnect(
    api: Api,
) -> None:
    response = await api.invoke("refund-approval", "Refund claim CLM-4821")
    execution_id = response.json()["execution_id"]
    # Opened right away: the events arrive as the services produce them, not all at the end.
    before = await read_until(api, execution_id, "interrupt")
    kinds = [kind for kind, _, _ in before]
    assert ("update", "lookup_claim") in [(k, d.get("node")) for k, _, d in before]
    review = before[-1][2]
    assert kinds[-1] == "interrupt"
    assert review["suspend_context"]["claim_id"] == "CLM-4821"
    assert review["allowed_decisions"] == ["approve", "reject"]

    # Disconnected; meanwhile a reviewer decides and the agent finishes.
    resumed = await api.resume(
        execution_id, {"decision": "approve", "generation": review["generation"]}
    )
    assert resumed.status_code == 202, resumed.text
    await api.wait_for(execution_id, "completed")

    after = await read_until(api, execution_id, "end", last_event_id=before[-1][1])
    statuses = [d["to_status"] for k, _, d in after if k == "status"]
    assert statuses == ["resuming", "running", "completed"]
    assert [d["node"] for k, _, d in after if k == "update"] == ["review", "issue_refund"]
    assert after[-1][0] == "end" and after[-1][2]["result"]["outcome"] == "refunded"

    # The two reads hold every event of the whole stream once. (A fresh read of a finished
    # execution has no review request: that belongs to a current suspension only.)
    def contents(events: list[Event]) -> list[str]:
        return sorted(json.dumps([kind, data], sort_keys=True) for kind, _, data in events)

    whole = await read_until(api, execution_id, "end")
    assert contents(whole) == contents([e for e in before + after if e[0] != "interrupt"])


async def test_the_cli_waits_on_the_stream_and_sees_the_agent_work(
    api: Api, cluster: Cluster
) -> None:
    response = await api.invoke("chain-approval", "2")
    execution_id = response.json()["execution_id"]
    key = api.client.headers["Authorization"].removeprefix("Bearer ")
    config = Config(url=cluster.base_url, api_key=key, project=api.project, workspace=api.workspace)
    progress: list[tuple[str, Any]] = []

    def review_twice() -> list[Json]:
        seen = []
        with httpx.Client(timeout=30) as http:
            gateway = Gateway(http, config)
            execution = gateway.wait(
                execution_id, settled, timeout=60, on_progress=lambda *p: progress.append(p)
            )
            seen.append(execution)
            gateway.resume(execution_id, {"decision": "approve"})
            seen.append(
                gateway.wait(execution_id, moved_on(execution), timeout=60, on_progress=None)
            )
        return seen

    first, second = await asyncio.to_thread(review_twice)
    assert (first["status"], first["generation"]) == ("suspended", 1)
    assert (second["status"], second["generation"]) == ("suspended", 2)
    # Node updates reach a client only through the stream.
    assert ("update", "plan") in [(kind, data.get("node")) for kind, data in progress]
