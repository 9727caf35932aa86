"""One sandbox replica runs many executions at once (issue 19): 32 `bench-pipeline` executions
whose model call takes 2 s (the scripted model, awaited as a remote model's call is), invoked
together, all have their model call in flight at the same time, where a consumer that handles
one message at a time would run them one after another (32 times the single execution's time).

The agent puts its model call's start and end times in the review's payload, so the overlap is
read from what the runs did, not from a clock in the test: only that is asserted. The wall
times (single execution, the 32 together) are printed, never asserted: speed is for benchmarks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e

PROJECT = "proj-concurrency"
MODEL_MS = 2000
EXECUTIONS = 32
LIMIT = 32
"""The sandbox's runs in flight (INTERLOCK_CONSUMER_CONCURRENCY; its default)."""


@pytest.fixture
async def one_sandbox(kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path) -> AsyncIterator[Api]:
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path / "cluster")
    await asyncio.to_thread((tmp_path / "cluster").mkdir)
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
    """Invoke ``count`` executions at once; the time until all are in review, and each one's
    model call (start, end)."""
    began = time.perf_counter()
    responses = await asyncio.gather(
        *(api.invoke("bench-pipeline", f"run {i} model_ms={MODEL_MS}") for i in range(count))
    )
    assert all(r.status_code == 202 for r in responses), [r.text for r in responses]
    ids = [r.json()["execution_id"] for r in responses]
    bodies = await asyncio.gather(*(api.wait_for(i, "suspended", timeout=120) for i in ids))
    elapsed = time.perf_counter() - began
    return elapsed, [model_call(body) for body in bodies]


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
