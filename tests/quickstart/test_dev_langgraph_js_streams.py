"""``@langchain/langgraph-sdk`` with ``useStream``'s default options (``tests/js/streams.mjs``)
against ``interlock dev``, whose streams close after a few seconds here
(``INTERLOCK_STREAM_MAX_SECONDS``): the same checks as against the separate-process services,
and a stream the server closes before its run stopped, continued by the client on its own from
the ``Location`` it named, with ``Last-Event-ID``, missing nothing and repeating nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_langgraph_js import JS, run_conversation
from tests.quickstart.test_dev_mode import FLOWS_RATE, KEY, Dev

pytestmark = pytest.mark.quickstart

CLOSES_AFTER_SECONDS = 3


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    closing = {**FLOWS_RATE, "INTERLOCK_STREAM_MAX_SECONDS": str(CLOSES_AFTER_SECONDS)}
    running = Dev(tmp_path / "data", extra_env=closing)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.mark.timeout(600)
async def test_the_js_client_streams_as_use_stream_does(dev: Dev) -> None:
    await run_conversation(
        f"{dev.url}/langgraph/projects/demo/workspaces/default",
        KEY,
        JS / "streams.mjs",
        {"INTERLOCK_STREAM_CLOSES_AFTER": str(CLOSES_AFTER_SECONDS)},
    )
