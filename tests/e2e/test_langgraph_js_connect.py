"""``@langchain/langgraph-sdk``, LangGraph's JS client, connecting as LangChain's UIs do to the
separate-process services (``tests/js/connect.mjs``): ``/info`` with and without a key, a CORS
preflight from the configured origin, a review whose JSON travels as ``text/plain`` (Agent Chat
UI's passthrough), and the assistants described as LangGraph's server describes them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.e2e.cluster import CORS_ORIGIN, Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.e2e.test_langgraph_js import JS, node_with_client

CONNECT = JS / "connect.mjs"
SECONDS = 120
"""How long the script may take (a few seconds on interlock dev)."""


async def run_connect(url: str, key: str, origin: str, script: Path = CONNECT) -> None:
    """Run ``script`` against the LangGraph API at ``url`` with an owner's ``key``, as a page of
    ``origin``; it exits 0 only when every check held."""
    node = node_with_client()
    env = {
        **os.environ,
        "INTERLOCK_LANGGRAPH_URL": url,
        "INTERLOCK_API_KEY": key,
        "INTERLOCK_CORS_ORIGIN": origin,
    }
    process = await asyncio.create_subprocess_exec(
        node, str(script), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(SECONDS):
            stdout, stderr = await process.communicate()
        ended = f"exited {process.returncode}"
    except TimeoutError:
        process.kill()
        stdout, stderr = await process.communicate()
        ended = f"did not finish in {SECONDS} s (killed)"
    assert process.returncode == 0, (
        f"node {script.name} {ended}\n"
        f"--- stdout\n{stdout.decode(errors='replace')}\n"
        f"--- stderr\n{stderr.decode(errors='replace')}"
    )


@pytest.mark.timeout(300)
async def test_the_js_client_connects_and_describes_as_the_uis_do(cluster: Cluster) -> None:
    await run_connect(
        f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        await cluster.key(PROJECT, email="js-connect@example.com"),
        CORS_ORIGIN,
    )
