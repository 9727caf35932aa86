"""One sandbox replica runs many executions at once (issue 19): 32 `bench-pipeline` executions
whose model call takes 2 s (the scripted model, awaited as a remote model's call is), invoked
together, all have their model call in flight at the same time, where a consumer that handles
one message at a time would run them one after another (32 times the single execution's time).

The agent puts its model call's start and end times in the review's payload, so the overlap is
read from what the runs did, not from a clock in the test: only that is asserted. The times
(single execution, the 32 together: from the first execution's creation to the last one's
suspension, as the store recorded them, so the test's own polling does not count) are printed,
never asserted: speed is for benchmarks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

PROJECT = "proj-concurrency"
MODEL_MS = 2000
EXECUTIONS = 32
LIMIT = 32
"""The sandbox's runs in flight (INTERLOCK_CONSUMER_CONCURRENCY; its default)."""
POLL_SECONDS = 0.5
"""How often the test looks at each execution: 32 executions looked at every 0.1 s would be
a load of their own on the two cores the services share."""


@pytest.fixture
async def one_sandbox(kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path) -> AsyncIterator[Api]:
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path / "cluster")
    cluster.create_topics()
    cluster.start("gateway", "orchestrator", "notifier")
    cluster.start("sandbox", env={"INTERLOCK_CONSUMER_CONCURRENCY": str(LIMIT)})
    try:
        await cluster.wait_ready()
        key = await cluster.key(PROJECT)
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=cluster.base_url, timeout=30, headers=headers) as c:
            yield Api(c, project=PROJECT, workspace="ws-concurrency")
    finally:
        cluster.stop()


async def run_to_review(api: Api, count: int) -> tuple[float, list[list[float]]]:
    """Invoke ``count`` executions at once; the time from the first one's creation to the last
    one's suspension, and each one's model call (start, end)."""
    responses = await asyncio.gather(
        *(api.invoke("bench-pipeline", f"run {i} model_ms={MODEL_MS}") for i in range(count))
    )
    assert all(r.status_code == 202 for r in responses), [r.text for r in responses]
    ids = [r.json()["execution_id"] for r in responses]
    bodies = await asyncio.gather(*(in_review(api, i) for i in ids))
    began = min(datetime.fromisoformat(b["created_at"]) for b in bodies)
    ended = max(datetime.fromisoformat(b["suspended_at"]) for b in bodies)
    return (ended - began).total_seconds(), [model_call(body) for body in bodies]


async def in_review(api: Api, execution_id: str) -> dict[str, Any]:
    return await eventually(
        lambda: api.status_of(execution_id),
        lambda body: body["status"] == "suspended",
        timeout=120,
        interval=POLL_SECONDS,
        what=f"{execution_id} in review",
    )


def model_call(body: dict[str, Any]) -> list[float]:
    found = body["suspend_context"]["model_call"]
    assert isinstance(found, list) and len(found) == 2 and found[0] <= found[1], body
    return [float(found[0]), float(found[1])]


def peak_overlap(calls: list[list[float]]) -> int:
    """The most calls running at one instant (an end at the instant of a start: not overlapping)."""
    edges = sorted([(start, 1) for start, _ in calls] + [(end, -1) for _, end in calls])
    running = peak = 0
    for _, change in edges:
        running += change
        peak = max(peak, running)
    return peak


async def test_one_sandbox_runs_many_executions_at_once(one_sandbox: Api) -> None:
    single, [call] = await run_to_review(one_sandbox, 1)
    assert call[1] - call[0] >= MODEL_MS / 1000
    together, calls = await run_to_review(one_sandbox, EXECUTIONS)
    peak = peak_overlap(calls)
    print(
        f"\none execution to its review: {single:.2f} s; {EXECUTIONS} invoked together:"
        f" {together:.2f} s ({together / single:.2f} x); model calls in flight at once: {peak}"
    )
    # One at a time, no two calls would overlap. Every run's call overlapped every other's
    # when all were in flight together; the invokes and their dispatch take a moment, so the
    # assertion leaves room for a few stragglers, not for a consumer that serializes.
    assert LIMIT // 2 <= peak <= LIMIT, calls
