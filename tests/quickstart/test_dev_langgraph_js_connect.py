"""``@langchain/langgraph-sdk`` connecting as LangChain's UIs do to ``interlock dev`` (one
process, SQLite, the in-process bus), a page of this machine allowed by development's own CORS
default: the same script as against the separate-process services
(tests/e2e/test_langgraph_js_connect.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_langgraph_js_connect import run_connect
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


@pytest.mark.timeout(300)
async def test_the_js_client_connects_and_describes_as_the_uis_do(dev: Dev) -> None:
    url = f"{dev.url}/langgraph/projects/demo/workspaces/default"
    await run_connect(url, KEY, "http://localhost:3000")
