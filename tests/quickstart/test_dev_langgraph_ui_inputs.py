"""What Agent Inbox and Agent Chat UI send, replayed with each LangGraph client against
``interlock dev`` (one process, SQLite, the in-process bus): the same flows as against the
separate-process services (tests/e2e/test_langgraph_ui_inputs.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.test_langgraph_js import JS, run_conversation
from tests.langgraph_sdk import ui_flows
from tests.langgraph_sdk.flows import Target
from tests.quickstart.test_dev_keys import wait_for_profile
from tests.quickstart.test_dev_langgraph_sdk import created_key
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = pytest.mark.quickstart


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    folder = tmp_path_factory.mktemp("dev-ui-inputs")
    dev = Dev(folder / "data", extra_env=FLOWS_RATE)
    try:
        dev.start()
        wait_for_profile(folder / ".interlock" / "profile.toml")
        yield Target(
            url=f"{dev.url}/langgraph/projects/demo/workspaces/default",
            owner=KEY,
            second_owner=created_key(folder, "demo", "approver@example.com"),
            other_project=created_key(folder, "elsewhere", "stranger@example.com"),
        )
    finally:
        dev.stop()


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
