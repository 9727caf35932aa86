"""Crons end to end, with ``langgraph-sdk`` only (issue 36, item 2): a cron every two seconds,
fired by two orchestrator replicas (separate processes, real Kafka and FerretDB), one of them
killed with SIGKILL half-way; every tick in between runs exactly once, on a thread of its own,
and nothing runs after the cron is deleted."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from services.orchestrator.crons import UNSTARTED_AFTER
from tests.e2e.cluster import Cluster
from tests.eventually import eventually
from tests.langgraph_sdk.flows import CHAT, said

pytestmark = pytest.mark.e2e

PROJECT = "proj-crons"
WORKSPACE = "ws-crons"
EVERY = timedelta(seconds=2)


@pytest.fixture
async def cron_cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    running = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path)
    async with running.serving():
        running.start("orchestrator")  # a second replica
        await running.wait_ready()
        yield running


async def cron_threads(client: Any, cron_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await client.threads.search(
        metadata={"cron_id": cron_id}, limit=100
    )
    return found


@pytest.mark.timeout(240)
async def test_each_tick_runs_once_with_two_orchestrators_one_killed_midway(
    cron_cluster: Cluster,
) -> None:
    cluster = cron_cluster
    url = f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
    client = get_client(url=url, api_key=await cluster.key(PROJECT), timeout=60)
    # Kept: each tick's thread stays to be counted (LangGraph's default deletes it once its
    # run has ended: tests/unit/test_crons.py).
    cron = await client.crons.create(
        CHAT, schedule="* * * * * */2", input=said("tick"), on_run_completed="keep"
    )
    cron_id = cron["cron_id"]
    assert cron["thread_id"] is None and cron["enabled"], cron
    assert [c["cron_id"] for c in await client.crons.search(assistant_id=CHAT)] == [cron_id]

    await eventually(
        lambda: cron_threads(client, cron_id), lambda t: len(t) >= 3, what="three ticks"
    )
    cluster.kill("orchestrator", 0)
    killed = len(await cron_threads(client, cron_id))
    await eventually(
        lambda: cron_threads(client, cron_id),
        lambda t: len(t) >= killed + 3,
        timeout=60,
        what="three ticks after the kill",
    )
    await client.crons.delete(cron_id)
    # A tick the killed replica claimed and never started is started by the survivor once
    # its claim is this old: wait that long, and a sweep more.
    await asyncio.sleep(UNSTARTED_AFTER.total_seconds() + 3)
    threads = await eventually(
        lambda: cron_threads(client, cron_id),
        lambda t: all(thread["status"] == "idle" for thread in t),
        timeout=60,
        what="every tick's run to end",
    )
    ticks = sorted(datetime.fromisoformat(t["metadata"]["cron_tick"]) for t in threads)
    assert len(ticks) == len(set(ticks)) >= killed + 3, ticks
    gaps = [b - a for a, b in itertools.pairwise(ticks) if b - a != EVERY]
    assert gaps == [], (ticks, cluster.log_tail("orchestrator"))
    for thread in threads:
        runs = await client.runs.list(thread["thread_id"])
        assert len(runs) == 1 and runs[0]["status"] == "success", runs
    # Deleted: no tick after.
    await asyncio.sleep(3 * EVERY.total_seconds())
    assert len(await cron_threads(client, cron_id)) == len(threads)
