"""Horizontal scaling, measured locally: 12 partitions, 3 sandbox, 2 orchestrator and 2
notifier processes share the work; one replica of each is stopped mid-load and a new one
started (rebalances), and every execution still completes exactly once. The throughput with 1
and with 3 sandbox replicas is reported (printed and written to the test artifacts), never
asserted: speed is for benchmarks."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.ledger import read_all
from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import Api
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

PROJECT = "proj-scaling"
PARTITIONS = 12
LOAD = 36


async def scaled_cluster(
    kafka: str, mongodb: str, workdir: Path, *, sandboxes: int, others: int
) -> Cluster:
    cluster = Cluster(kafka=kafka, mongodb=mongodb, workdir=workdir)
    cluster.env["INTERLOCK_TOPIC_PARTITIONS"] = str(PARTITIONS)
    # A stopped replica's partitions move after the session timeout: keep it short.
    cluster.env["INTERLOCK_KAFKA_SESSION_TIMEOUT_MS"] = "6000"
    cluster.create_topics()
    cluster.start("gateway")
    for _ in range(others):
        cluster.start("orchestrator", "notifier")
    for _ in range(sandboxes):
        cluster.start("sandbox")
    await cluster.wait_ready()
    return cluster


@pytest.fixture
async def api_of() -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []

    async def make(cluster: Cluster) -> Api:
        key = await cluster.key(PROJECT)
        client = httpx.AsyncClient(
            base_url=cluster.base_url, timeout=30, headers={"Authorization": f"Bearer {key}"}
        )
        clients.append(client)
        return Api(client, project=PROJECT, workspace="ws-scale")

    yield make
    for client in clients:
        await client.aclose()


async def review_all(api: Api, count: int, *, during: Any = None) -> list[str]:
    """Start ``count`` refunds, approve each as it suspends, wait for all to complete; run
    ``during`` once half of them are suspended."""
    ids = []
    for _ in range(count):
        # The claim the refund agent knows asks for a review; each invoke is an execution.
        response = await api.invoke("refund-approval", "Refund claim CLM-4821")
        assert response.status_code == 202, response.text
        ids.append(response.json()["execution_id"])
    approved: set[str] = set()

    async def approve_suspended() -> int:
        for execution_id in ids:
            if execution_id in approved:
                continue
            body = await api.status_of(execution_id)
            if body["status"] == "suspended":
                answer = {"decision": "approve", "generation": body["generation"]}
                response = await api.resume(execution_id, answer)
                assert response.status_code == 202, response.text
                approved.add(execution_id)
        return len(approved)

    if during is not None:
        await eventually(approve_suspended, lambda n: n >= count // 2, timeout=120,
                         interval=0.5, what="half the executions suspended")  # fmt: skip
        await during()
    await eventually(approve_suspended, lambda n: n == count, timeout=180, interval=0.5,
                     what="every execution suspended and approved")  # fmt: skip
    for execution_id in ids:
        done = await api.wait_for(execution_id, "completed", "error", timeout=180)
        assert done["status"] == "completed", done
    return ids


def handled_by(cluster: Cluster, service: str, index: int, event: str) -> int:
    path = cluster.workdir / f"{service}-{index}.log"
    return sum(f'"event": "{event}"' in line for line in path.read_text().splitlines())


@pytest.mark.timeout(600)
async def test_replicas_share_the_work_and_survive_a_rolling_restart(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path, api_of: Any
) -> None:
    cluster = await scaled_cluster(
        kafka_bootstrap, mongodb_uri, tmp_path / "cluster", sandboxes=3, others=2
    )
    try:
        api = await api_of(cluster)

        async def roll_one_of_each() -> None:
            # One replica of each service stops (SIGTERM, as Kubernetes does) and a new one
            # starts: two rebalances per consumer group while executions are in flight.
            for service in ("sandbox", "orchestrator", "notifier"):
                await asyncio.to_thread(cluster.retire, service, 0)
                cluster.start(service)
            await cluster.wait_ready()

        ids = await review_all(api, LOAD, during=roll_one_of_each)
        refunds = Counter(
            e["execution_id"] for e in read_all(cluster.ledger) if e["kind"] == "refund"
        )
        assert set(refunds) == set(ids) and set(refunds.values()) == {1}  # none lost or doubled
        # Every original replica did part of the work before it was stopped or alongside.
        for index in range(3):
            assert handled_by(cluster, "sandbox", index, "dispatch.ran") > 0, index
        for service in ("orchestrator", "notifier"):
            for index in range(2):
                assert handled_by(cluster, service, index, "event.handled") > 0, (service, index)
    finally:
        cluster.stop()


@pytest.mark.timeout(600)
async def test_throughput_with_one_and_three_sandboxes_is_reported(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path, api_of: Any
) -> None:
    results = {}
    for sandboxes in (1, 3):
        cluster = await scaled_cluster(
            kafka_bootstrap,
            mongodb_uri,
            tmp_path / f"cluster-{sandboxes}",
            sandboxes=sandboxes,
            others=1,
        )
        try:
            api = await api_of(cluster)
            began = time.perf_counter()
            ids = await review_all(api, LOAD)
            elapsed = time.perf_counter() - began
            assert len(ids) == LOAD
            results[f"{sandboxes}_sandbox"] = {
                "executions": LOAD,
                "seconds": round(elapsed, 2),
                "executions_per_second": round(LOAD / elapsed, 2),
            }
        finally:
            cluster.stop()
    report = {
        "benchmark": "review round trips (invoke, suspend, approve, complete)",
        "partitions": PARTITIONS,
        "machine": f"{os.cpu_count()} cores, loopback Kafka and FerretDB",
        "results": results,
    }
    artifacts = Path(os.environ.get("INTERLOCK_TEST_ARTIFACTS", REPO / ".artifacts"))
    await asyncio.to_thread(write_report, artifacts / "scaling.json", report)
    print(json.dumps(report, indent=2))


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
