"""``@langchain/langgraph-sdk`` with ``useStream``'s default options (``tests/js/streams.mjs``)
against the separate-process services: whole messages, namespaced events and custom progress of
a graph with a subgraph and a review, the run named by ``Content-Location``, a join after a
dropped stream with ``Last-Event-ID``, and a run cancelled when its client goes (issue 34)."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.e2e.test_langgraph_js import JS, run_conversation

STREAMS = JS / "streams.mjs"


@pytest.mark.timeout(600)
async def test_the_js_client_streams_as_use_stream_does(cluster: Cluster) -> None:
    await run_conversation(
        f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        await cluster.key(PROJECT, email="js-streams@example.com"),
        STREAMS,
    )
