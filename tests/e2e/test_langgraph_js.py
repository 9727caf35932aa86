"""``@langchain/langgraph-sdk``, LangGraph's JS client, pointed at the separate-process services:
the conversation of ``flows.conversation_flow`` driven by ``tests/js/conversation.mjs`` through
nothing but a URL and an API key (issue 33). The client is the version ``tests/js/package.json``
pins, installed from its lockfile by ``npm ci`` when it is not installed yet."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE

JS = Path(__file__).resolve().parents[1] / "js"
CONVERSATION = JS / "conversation.mjs"
SECONDS = 240
"""How long the script may take (about 15 s on interlock dev)."""


def pinned_versions() -> dict[str, str]:
    """Each dependency of tests/js and the version it pins (an alias ``npm:pkg@v`` pins v)."""
    pinned = json.loads((JS / "package.json").read_text())["dependencies"]
    return {name: str(spec).rpartition("@")[2] for name, spec in pinned.items()}


def installed_versions() -> dict[str, str | None]:
    installed: dict[str, str | None] = {}
    for name in pinned_versions():
        manifest = JS / "node_modules" / name / "package.json"
        installed[name] = (
            str(json.loads(manifest.read_text())["version"]) if manifest.exists() else None
        )
    return installed


def node_with_client() -> str:
    """The ``node`` to run the script with, once the pinned clients are installed in tests/js:
    ``npm ci`` (the lockfile's exact tree, npm's cache first) only when it is missing or another
    version. Skips where node or npm is not installed at all, except in CI, which must run it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        needed = "node and npm are needed to run LangGraph's JS client (tests/js)"
        if os.environ.get("CI"):
            pytest.fail(f"{needed}: CI has them, so their absence is a broken machine")
        pytest.skip(needed)
    # Two test runs on one checkout must not install into the same node_modules at once.
    with (JS / "package-lock.json").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed_versions() != pinned_versions():
            installed = subprocess.run(
                [npm, "ci", "--prefix", str(JS), "--prefer-offline", "--no-audit", "--no-fund"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert installed.returncode == 0, (
                f"npm ci failed:\n{installed.stdout}{installed.stderr}"
            )
            assert installed_versions() == pinned_versions(), installed.stdout
    return node


async def run_conversation(
    url: str, key: str, script: Path = CONVERSATION, env: dict[str, str] | None = None
) -> None:
    """Run ``script`` (tests/js/conversation.mjs by default) against the LangGraph API at
    ``url`` (one workspace's root) with an owner's ``key`` (and ``env``); it exits 0 only when
    every check held."""
    node = node_with_client()
    env = {**os.environ, **(env or {}), "INTERLOCK_LANGGRAPH_URL": url, "INTERLOCK_API_KEY": key}
    process = await asyncio.create_subprocess_exec(
        node,
        str(script),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
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


@pytest.mark.timeout(600)
async def test_the_js_client_holds_a_conversation_with_every_busy_thread_policy(
    cluster: Cluster,
) -> None:
    await run_conversation(
        f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        await cluster.key(PROJECT, email="js-client@example.com"),
    )
