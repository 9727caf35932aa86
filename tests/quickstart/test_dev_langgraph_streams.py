"""Streams as LangChain's UIs read them, with ``langgraph-sdk`` against ``interlock dev`` (one
process, SQLite, the in-process bus): the same flows as against the separate-process services
(tests/e2e/test_langgraph_streams.py)."""

from __future__ import annotations

import pytest

from tests.langgraph_sdk import stream_flows
from tests.langgraph_sdk.audit import cancelled_on_disconnect, turn_audit
from tests.langgraph_sdk.flows import Target
from tests.quickstart.test_dev_langgraph_sdk import target as dev_target

pytestmark = pytest.mark.quickstart
target = dev_target
"""The same ``interlock dev`` as the other langgraph-sdk flows."""


async def test_every_stream_mode_of_a_graph_with_a_subgraph_and_a_review(target: Target) -> None:
    await stream_flows.ui_streams_flow(target)


async def test_a_dropped_stream_is_joined_again_after_its_last_event(target: Target) -> None:
    await stream_flows.join_after_a_drop_flow(target)


async def test_a_client_that_goes_away_cancels_its_run_and_the_audit_says_so(
    target: Target,
) -> None:
    thread, run = await stream_flows.on_disconnect_flow(target)
    base = target.url.split("/langgraph/")[0]
    audit = await turn_audit(base, target.owner, "demo", "default", thread)
    assert cancelled_on_disconnect(audit, target.owner, run), audit
