"""Thread retention end to end, with ``langgraph-sdk`` only: two orchestrator replicas (separate
processes) on real Kafka and FerretDB sweep threads past their ``ttl``, their clock a file the
test moves forward. An expired thread is deleted and its turns' checkpoints erased; one with no
ttl is kept; one whose turn waits for a review is kept until the review is answered and the
clock passes its postponed expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from pymongo import AsyncMongoClient

from shared.domain.threads import turn_execution_id
from tests.e2e.clocked import clocked_cluster, set_clock
from tests.e2e.cluster import Cluster
from tests.eventually import eventually
from tests.langgraph_sdk.flows import CHAT, last_reply, said

pytestmark = pytest.mark.e2e

PROJECT = "proj-retention"
WORKSPACE = "ws-retention"
T0 = datetime.now(UTC).replace(microsecond=0)
HOUR = timedelta(hours=1)


@pytest.fixture
async def retention_cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    env = {"INTERLOCK_THREAD_RETENTION_POLL_SECONDS": "0.3"}
    async with clocked_cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path, now=T0, env=env
    ) as cluster:
        yield cluster


async def gone(client: Any, thread_id: str) -> bool:
    try:
        await client.threads.get(thread_id)
    except httpx.HTTPStatusError as error:
        return error.response.status_code == 404
    return False


async def test_threads_past_their_ttl_are_deleted_by_the_sweep(retention_cluster: Cluster) -> None:
    cluster = retention_cluster
    url = f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
    client = get_client(url=url, api_key=await cluster.key(PROJECT), timeout=60)

    short = (await client.threads.create(ttl=60))["thread_id"]
    await client.runs.wait(short, CHAT, input=said("hello"))
    kept = (await client.threads.create())["thread_id"]
    await client.runs.wait(kept, CHAT, input=said("hello"))
    waiting = (await client.threads.create(ttl={"strategy": "delete", "ttl": 60}))["thread_id"]
    review = await client.runs.wait(waiting, CHAT, input=said("refund my order"))
    [interrupt] = review["__interrupt__"]

    set_clock(cluster, T0 + 2 * HOUR)
    await eventually(lambda: gone(client, short), bool, what="the expired thread deleted")
    uri = cluster.env["INTERLOCK_MONGODB_URI"]
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    try:
        heads = mongo[cluster.database].checkpoint_heads
        turn = turn_execution_id(PROJECT, WORKSPACE, short, 1)
        await eventually(
            lambda: heads.count_documents({"thread_id": turn}),
            lambda n: n == 0,
            what="its checkpoints erased",
        )
    finally:
        await mongo.close()
    # A few sweeps later: the thread with no ttl and the one waiting for a review are there.
    set_clock(cluster, T0 + 3 * HOUR)
    assert (await client.threads.get(kept))["status"] == "idle"
    assert (await client.threads.get(waiting))["status"] == "interrupted"

    answered = await client.runs.wait(
        waiting, CHAT, command={"resume": {interrupt["id"]: "approve"}}
    )
    assert "reviewer said approve" in last_reply(answered), answered
    set_clock(cluster, T0 + 4 * HOUR)
    await eventually(lambda: gone(client, waiting), bool, what="the reviewed thread deleted")
    assert (await client.threads.get(kept))["status"] == "idle"
