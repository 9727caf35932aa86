"""Issue 20, item 1, against the four services as processes on real Kafka and FerretDB: an open
execution stream is pushed what happens (``execution.activity``), and the gateway reads no
execution and no progress after the stream opened, also after the gateway restarted and the
client came back with Last-Event-ID.

The gateway's reads are counted by its own ``/metrics`` (``interlock_store_command_seconds``,
by collection). The decisions come from an outside system on ``decision.submitted``, not through
this gateway, so everything the gateway reads in the window would be the stream's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from httpx_sse import aconnect_sse

from bench.commands import Counts, diff, settle
from shared.events import DecisionSubmitted
from tests.e2e.cluster import Cluster
from tests.stream_events import read_until, statuses

pytestmark = pytest.mark.e2e

PROJECT, WORKSPACE = "proj-push", "ws-push"
EXECUTION_COLLECTIONS = {"executions", "execution_versions", "execution_progress"}


@pytest.fixture
async def pushed(kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path)
    async with cluster.serving():
        yield cluster


async def execution_reads(cluster: Cluster, http: httpx.AsyncClient) -> Counts:
    """The gateway's commands on executions and progress so far, once its counts are still."""
    ports = {"gateway": cluster.health_ports[("gateway", 0)]}
    counts = await settle(http, ports, quiet=1.0, timeout=30)
    return {key: n for key, n in counts.items() if key[1] in EXECUTION_COLLECTIONS}


async def decide_from_outside(
    cluster: Cluster, execution_id: str, suspension_id: int, decision: str = "approve"
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"])
    await producer.start()
    try:
        event = DecisionSubmitted(
            execution_id=execution_id,
            project_id=PROJECT,
            workspace_id=WORKSPACE,
            suspension_id=suspension_id,
            decision=decision,
        )
        body = event.model_dump_json().encode()
        await producer.send_and_wait(
            f"{cluster.topic_prefix}decision.submitted",
            body,
            key=execution_id.encode(),
            # A registered outside producer signs what it publishes (shared/senders.py).
            headers=[(k, v.encode()) for k, v in cluster.producer().headers(body).items()],
        )
    finally:
        await producer.stop()


async def test_an_open_stream_is_pushed_everything_across_a_gateway_restart(
    pushed: Cluster,
) -> None:
    key = await pushed.key(PROJECT)
    headers = {"Authorization": f"Bearer {key}"}
    params = {"workspace_id": WORKSPACE}
    async with httpx.AsyncClient(base_url=pushed.base_url, timeout=30, headers=headers) as api:
        invoked = await api.post(
            f"/api/v1/projects/{PROJECT}/workspaces/{WORKSPACE}/invoke",
            json={"agent": "chain-approval", "message": "2"},
        )
        assert invoked.status_code == 202, invoked.text
        execution_id = invoked.json()["execution_id"]
        url = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/stream"

        # Opened at once: the first suspension is pushed to it as the services get there.
        async with aconnect_sse(api, "GET", url, params=params) as source:
            events = source.aiter_sse()
            first = await read_until(events, "status")
            opened = await execution_reads(pushed, api)
            first += await read_until(events, "interrupt")
            assert first[-1][2]["generation"] == 1
            assert diff(await execution_reads(pushed, api), opened) == {}

        # The gateway restarts; meanwhile the first decision is taken.
        pushed.stop("gateway")
        pushed.start("gateway")
        await pushed.wait_ready()
        await decide_from_outside(pushed, execution_id, suspension_id=1)

        resume_at = {"Last-Event-ID": first[-1][1]}
        async with aconnect_sse(api, "GET", url, params=params, headers=resume_at) as source:
            events = source.aiter_sse()
            second = await read_until(events, "status")
            opened = await execution_reads(pushed, api)
            second += await read_until(events, "interrupt")
            assert second[-1][2]["generation"] == 2
            await decide_from_outside(pushed, execution_id, suspension_id=2)
            third = await read_until(events, "end")
            assert diff(await execution_reads(pushed, api), opened) == {}

    assert statuses(first + second + third) == [
        "pending", "running", "suspended", "resuming", "running", "suspended",
        "resuming", "running", "completed",
    ]  # fmt: skip
    assert third[-1][0] == "end" and third[-1][2]["status"] == "completed"
