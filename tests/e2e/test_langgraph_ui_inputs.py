"""What Agent Inbox and Agent Chat UI send (issue 34: HumanInterrupt answers, ``input: {}``
beside a command, ``command.goto``, ``update_state`` as END, a thread search by metadata and
status, regenerate), replayed with each LangGraph client alone against the separate-process
services: ``langgraph-sdk`` (tests/langgraph_sdk/ui_flows.py) and ``@langchain/langgraph-sdk``
(tests/js/ui-inputs.mjs); and the stock UIs' own SDK versions with their default options,
Agent Chat UI's through its ``useStream`` hook (tests/js/stock-uis.mjs)."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.e2e.test_langgraph_js import JS, run_conversation
from tests.langgraph_sdk import ui_flows
from tests.langgraph_sdk.flows import Target


@pytest.fixture
async def target(cluster: Cluster) -> Target:
    return Target(
        url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        owner=await cluster.key(PROJECT, email="inbox-owner@example.com"),
        second_owner=await cluster.key(PROJECT, email="inbox-second@example.com"),
        other_project=await cluster.key("proj-elsewhere"),
    )


async def test_agent_inbox_lists_and_answers_human_interrupts(target: Target) -> None:
    await ui_flows.inbox_flow(target)


async def test_agent_chat_ui_resolves_approves_reloads_and_regenerates(target: Target) -> None:
    await ui_flows.chat_ui_flow(target)


@pytest.mark.timeout(600)
async def test_the_js_client_replays_agent_inbox_and_agent_chat_ui(target: Target) -> None:
    await run_conversation(target.url, target.owner, JS / "ui-inputs.mjs")


@pytest.mark.timeout(600)
async def test_the_stock_uis_sdk_versions_and_use_stream_drive_a_conversation_and_the_inbox(
    target: Target,
) -> None:
    """Agent Chat UI's own ``useStream`` (the React hook, SDK 1.8.10) and Agent Inbox's client
    (SDK 1.9.28) with the options those UIs pass (tests/js/stock-uis.mjs)."""
    await run_conversation(target.url, target.owner, JS / "stock-uis.mjs")
