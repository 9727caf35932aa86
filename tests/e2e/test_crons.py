"""Crons end to end (issue 36, item 2), on separate processes with real Kafka and FerretDB:
with ``langgraph-sdk`` only, a cron every two seconds fired by two orchestrator replicas, one of
them killed with SIGKILL half-way; every tick in between runs exactly once, on a thread of its
own, and nothing runs after the cron is deleted. And through the native API: each tick an
execution, listed with the tick that started it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
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


@pytest.mark.timeout(120)
async def test_the_native_api_schedules_executions_and_lists_what_it_fired(
    cron_cluster: Cluster,
) -> None:
    """The same crons through Interlock's own API: each tick an execution, listed with the
    tick that started it; the cron seen by langgraph-sdk too."""
    cluster = cron_cluster
    key = await cluster.key(PROJECT)
    crons = f"/api/v1/projects/{PROJECT}/crons"
    scope = {"workspace_id": WORKSPACE}
    async with httpx.AsyncClient(
        base_url=cluster.base_url, headers={"authorization": f"Bearer {key}"}, timeout=30
    ) as http:
        made = await http.post(
            crons,
            params=scope,
            json={"agent": CHAT, "schedule": "* * * * * */2", "message": "tick"},
        )
        assert made.status_code == 201, made.text
        cron_id = made.json()["cron_id"]
        url = f"/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
        client = get_client(url=f"{cluster.base_url}{url}", api_key=key, timeout=60)
        assert [c["cron_id"] for c in await client.crons.search()] == [cron_id]

        async def fired() -> list[dict[str, Any]]:
            listed = await http.get(f"{crons}/{cron_id}/ticks", params=scope)
            assert listed.status_code == 200, listed.text
            items: list[dict[str, Any]] = listed.json()["items"]
            return [tick for tick in items if tick["started"]]

        await eventually(fired, lambda ticks: len(ticks) >= 2, what="two ticks")
        assert (await http.delete(f"{crons}/{cron_id}", params=scope)).status_code == 204
        await asyncio.sleep(1)  # a tick fired just before the delete ends
        ticks = await fired()
        assert len({t["execution_id"] for t in ticks}) == len(ticks) >= 2, ticks
        for tick in ticks:

            async def execution(tick: dict[str, Any] = tick) -> dict[str, Any]:
                found = await http.get(
                    f"/api/v1/projects/{PROJECT}/executions/{tick['execution_id']}",
                    params=scope,
                )
                body: dict[str, Any] = found.json()
                return body

            done = await eventually(
                execution, lambda e: e["status"] == "completed", what="the tick's execution"
            )
            assert "you said 'tick'" in str(done["result"]), done
