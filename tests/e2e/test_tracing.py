"""Traces across real processes and real Kafka: the four services run with the console span
exporter, and the spans they print show one connected trace per run segment, whose hops cross
process boundaries through the ``traceparent`` header, and a resume linked to its origin."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

PROJECT = "proj-tracing"


@pytest.fixture
async def traced(kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path)
    cluster.env.update(
        {
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_BSP_SCHEDULE_DELAY": "200",  # export within moments, not every 5 s
        }
    )
    async with cluster.serving():
        yield cluster


def exported_spans(cluster: Cluster) -> list[dict[str, Any]]:
    """Every span the processes printed (one JSON object a line, among the log lines)."""
    spans = []
    for path in sorted(cluster.workdir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith('{"name"'):
                span = json.loads(line)
                span["process"] = path.stem
                spans.append(span)
    return spans


def in_trace(spans: list[dict[str, Any]], trace_id: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["context"]["trace_id"] == trace_id]


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


async def test_one_trace_crosses_every_process_and_the_resume_links_back(
    traced: Cluster,
) -> None:
    key = await traced.key(PROJECT)
    async with httpx.AsyncClient(
        base_url=traced.base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}
    ) as client:
        api = Api(client, project=PROJECT)
        suspended = await api.start_suspended()
        execution_id = suspended["execution_id"]
        prefix = traced.topic_prefix

        def spans_of(route: str) -> Any:
            async def read() -> list[dict[str, Any]]:
                return await asyncio.to_thread(exported_spans, traced)

            def complete(spans: list[dict[str, Any]]) -> bool:
                # Each process exports in its own batches: wait until the notifier's part has
                # arrived and every parent named by a span of the trace has too.
                roots = named(spans, route)
                if len(roots) != 1:
                    return False
                trace = in_trace(spans, roots[0]["context"]["trace_id"])
                ids = {s["context"]["span_id"] for s in trace}
                return all(not s["parent_id"] or s["parent_id"] in ids for s in trace) and any(
                    s["name"] == f"{prefix}execution.suspended process"
                    and s["process"].startswith("notifier")
                    for s in trace
                )

            return eventually(
                read,
                complete,
                timeout=30,
                what="the processes to export the first segment's whole trace",
            )

        invoke_route = "POST /api/v1/projects/{project_id}/workspaces/{workspace_id}/invoke"
        first = await spans_of(invoke_route)
        (server,) = named(first, invoke_route)
        origin = in_trace(first, server["context"]["trace_id"])
        by_id = {s["context"]["span_id"]: s for s in origin}
        processes = {s["process"].split("-")[0] for s in origin}
        assert processes == {"gateway", "orchestrator", "sandbox", "notifier"}
        orphans = [s["name"] for s in origin if s["parent_id"] and s["parent_id"] not in by_id]
        assert orphans == []
        (run,) = named(origin, "run refund-approval")
        dispatched = by_id[run["parent_id"]]
        assert dispatched["name"] == f"{prefix}execution.dispatched process"
        publisher = by_id[dispatched["parent_id"]]
        # The hop crossed processes: published by the orchestrator, handled by the sandbox.
        assert publisher["process"].startswith("orchestrator")
        assert dispatched["process"].startswith("sandbox")
        assert {s["name"] for s in origin if s["parent_id"] == run["context"]["span_id"]} >= {
            "node lookup_claim",
            "node review",
        }

        decided = await api.resume(execution_id, {"decision": "approve"})
        assert decided.status_code in (200, 202), decided.text
        await api.wait_for(execution_id, "completed")
        resume_route = "POST /api/v1/projects/{project_id}/executions/{execution_id}/resume"

        async def read_all() -> list[dict[str, Any]]:
            return await asyncio.to_thread(exported_spans, traced)

        # The gateway exports its resume span in a batch of its own, which may reach the
        # exporter after the sandbox's spans: wait for both processes' parts.
        spans = await eventually(
            read_all,
            lambda spans: (
                len(named(spans, "run refund-approval")) == 2
                and len(named(spans, "node issue_refund")) == 1
                and len(named(spans, resume_route)) == 1
            ),
            timeout=30,
            what="the resumed run's span and the gateway's resume span",
        )
        (resume,) = named(spans, resume_route)
        later = in_trace(spans, resume["context"]["trace_id"])
        (resumed_run,) = named(later, "run refund-approval")
        assert resumed_run["attributes"]["interlock.dispatch"] == "resume"
        assert [link["context"]["span_id"] for link in resumed_run["links"]] == [
            server["context"]["span_id"]
        ]
        assert "node issue_refund" in {s["name"] for s in later}
