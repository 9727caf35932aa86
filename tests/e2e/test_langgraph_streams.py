"""Streams as LangChain's UIs read them (issue 34), with ``langgraph-sdk`` against the
separate-process services on real Kafka and the MongoDB-compatible server: every stream mode of
a graph with a subgraph, custom progress and a review; a join after a dropped stream with
``Last-Event-ID``; a run cancelled when its client goes (``on_disconnect='cancel'``), audited."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.langgraph_sdk import stream_flows
from tests.langgraph_sdk.audit import cancelled_on_disconnect, turn_audit
from tests.langgraph_sdk.flows import Target


@pytest.fixture
async def target(cluster: Cluster) -> Target:
    return Target(
        url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        owner=await cluster.key(PROJECT, email="streams@example.com"),
        second_owner=await cluster.key(PROJECT, email="streams-approver@example.com"),
        other_project=await cluster.key("proj-elsewhere"),
    )


async def test_every_stream_mode_of_a_graph_with_a_subgraph_and_a_review(target: Target) -> None:
    await stream_flows.ui_streams_flow(target)


async def test_a_dropped_stream_is_joined_again_after_its_last_event(target: Target) -> None:
    await stream_flows.join_after_a_drop_flow(target)


async def test_a_client_that_goes_away_cancels_its_run_and_the_audit_says_so(
    target: Target, cluster: Cluster
) -> None:
    thread, run = await stream_flows.on_disconnect_flow(target)
    audit = await turn_audit(cluster.base_url, target.owner, PROJECT, WORKSPACE, thread)
    assert cancelled_on_disconnect(audit, target.owner, run), audit
