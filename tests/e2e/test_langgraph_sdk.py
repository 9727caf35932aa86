"""langgraph-sdk, pointed at the separate-process services (real Kafka, the MongoDB-compatible
server): the LangGraph client drives Interlock with nothing but a URL and an API key."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
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


async def test_the_middleware_answered_approve_edit_reject(target: flows.Target) -> None:
    await flows.middleware_flow(target)


async def test_a_streamed_run_and_its_resumed_run(target: flows.Target) -> None:
    await flows.stream_flow(target)


async def test_a_run_created_joined_and_cancelled(target: flows.Target) -> None:
    await flows.cancel_flow(target)


async def test_other_projects_see_nothing_and_duties_stay_separate(target: flows.Target) -> None:
    await flows.isolation_flow(target)


async def test_a_thread_is_a_conversation_with_a_busy_thread_policy(target: flows.Target) -> None:
    await flows.conversation_flow(target)
