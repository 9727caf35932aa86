"""langgraph-sdk, pointed at the separate-process services (real Kafka, the MongoDB-compatible
server): the LangGraph client drives Interlock with nothing but a URL and an API key."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import AsyncMongoClient

from shared.domain.threads import turn_execution_id
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.eventually import eventually
from tests.langgraph_sdk import flows


@pytest.fixture
async def target(cluster: Cluster) -> flows.Target:
    return flows.Target(
        url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        owner=await cluster.key(PROJECT, email="requester@example.com"),
        second_owner=await cluster.key(PROJECT, email="approver@example.com"),
        other_project=await cluster.key("proj-elsewhere"),
    )


async def test_the_refund_flow(target: flows.Target) -> None:
    await flows.refund_flow(target)


async def test_a_fact_remembered_across_threads_through_the_store(target: flows.Target) -> None:
    await flows.memory_flow(target)


async def test_a_runs_webhook_arrives_once_signed_at_its_interrupt_and_its_end(
    target: flows.Target,
) -> None:
    await flows.webhook_flow(target)


async def test_a_cron_runs_each_tick_once_with_its_webhook(target: flows.Target) -> None:
    await flows.cron_flow(target)


async def test_a_cron_on_a_thread_runs_each_tick_as_its_next_turn(target: flows.Target) -> None:
    await flows.thread_cron_flow(target)


async def test_the_middleware_answered_approve_edit_reject(target: flows.Target) -> None:
    await flows.middleware_flow(target)


async def test_a_streamed_run_and_its_resumed_run(target: flows.Target) -> None:
    await flows.stream_flow(target)


async def test_a_run_created_joined_and_cancelled(target: flows.Target) -> None:
    await flows.cancel_flow(target)


async def test_other_projects_see_nothing_and_duties_stay_separate(target: flows.Target) -> None:
    await flows.isolation_flow(target)


async def test_a_thread_is_a_conversation_with_a_busy_thread_policy(
    target: flows.Target, cluster: Cluster
) -> None:
    """The conversation, then what its deleted thread leaves in the store: its turns'
    checkpoints, durable steps, attempts and progress erased by the orchestrator; their audit
    (each execution, with its versions) kept, the default policy."""
    [deleted] = await flows.conversation_flow(target)
    turns = [turn_execution_id(PROJECT, WORKSPACE, deleted, n) for n in range(1, 30)]
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        cluster.env["INTERLOCK_MONGODB_URI"]
    )
    try:
        db = client[cluster.database]
        stored = [t async for t in db.executions.find({"_id": {"$in": turns}}, {"_id": 1})]
        ran = [d["_id"] for d in stored]
        assert len(ran) >= 9, ran  # the flow's turns, every one kept with its audit

        async def left() -> dict[str, int]:
            by_thread = {"thread_id": {"$in": ran}}
            by_execution = {"execution_id": {"$in": ran}}
            by_key = {"$or": [{"_id": {"$gte": f"{e}:", "$lt": f"{e};"}} for e in ran]}
            return {
                "checkpoints": await db.checkpoints.count_documents(by_thread),
                "checkpoint_heads": await db.checkpoint_heads.count_documents(by_thread),
                "steps": await db.steps.count_documents(by_execution),
                "attempts": await db.attempts.count_documents(by_execution),
                "execution_progress": await db.execution_progress.count_documents(by_key),
            }

        await eventually(left, lambda n: not any(n.values()), what="the thread erased")
        assert await db.executions.count_documents({"_id": {"$in": ran}}) == len(ran)
    finally:
        await client.close()
