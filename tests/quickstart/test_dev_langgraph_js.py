"""``@langchain/langgraph-sdk``, LangGraph's JS client, pointed at ``interlock dev`` (one process,
SQLite, the in-process bus): the same conversation as against the separate-process services
(tests/e2e/test_langgraph_js.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_langgraph_js import run_conversation
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = pytest.mark.quickstart


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = Dev(tmp_path / "data", extra_env=FLOWS_RATE)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.mark.timeout(600)
async def test_the_js_client_holds_a_conversation_with_every_busy_thread_policy(dev: Dev) -> None:
    await run_conversation(f"{dev.url}/langgraph/projects/demo/workspaces/default", KEY)
