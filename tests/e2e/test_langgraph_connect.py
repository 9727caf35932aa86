"""A browser-based LangGraph client meeting the separate-process services (real Kafka, the
MongoDB-compatible server): ``/info`` and ``/ok``, CORS for the configured origin, JSON sent as
``text/plain`` through a run and its review, and the assistants described as LangGraph's server
describes the same graphs, from what the sandboxes published in the store."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import CORS_ORIGIN, Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.langgraph_sdk import connect_flows
from tests.langgraph_sdk.flows import Target


@pytest.fixture
async def target(cluster: Cluster) -> Target:
    return Target(
        url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        owner=await cluster.key(PROJECT, email="connect@example.com"),
        second_owner=await cluster.key(PROJECT, email="connect-approver@example.com"),
        other_project=await cluster.key("proj-elsewhere"),
    )


async def test_a_page_of_the_configured_origin_connects_and_runs_a_review(
    target: Target,
) -> None:
    await connect_flows.connect_flow(target, CORS_ORIGIN)


async def test_the_assistants_are_described_as_langgraph_describes_them(target: Target) -> None:
    await connect_flows.describe_flow(target)
