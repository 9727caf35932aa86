"""Conformance, distributed: LangGraph's documented human-in-the-loop patterns
(tests/fixtures/docs_patterns) driven by langgraph-sdk alone against the four services as
separate processes over Kafka and FerretDB, answered as LangGraph's docs answer them
(``command={"resume": ...}``), end in the state plain LangGraph ends in. The in-process and
embedded legs are tests/unit/test_docs_patterns.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client

from shared.settings import DEFAULT_AGENTS_FILE
from tests.e2e.cluster import Cluster
from tests.fixtures.docs_patterns.scripts import (
    AGENT_OF,
    AGENTS,
    GO,
    INPUTS,
    SCRIPTS,
    Answer,
    plain_langgraph,
)
from tests.unit.test_langgraph_project import project

pytestmark = pytest.mark.e2e

PROJECT, WORKSPACE = "proj-docs", "ws-docs"


@pytest.fixture(scope="module")
async def patterns_cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    """A cluster whose agents file holds the documented patterns beside the examples."""
    workdir = tmp_path_factory.mktemp("docs-patterns")
    agents = workdir / "agents.toml"
    agents.write_text(DEFAULT_AGENTS_FILE.read_text() + AGENTS)
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=workdir / "cluster")
    cluster.env["INTERLOCK_AGENTS_FILE"] = str(agents)
    async with cluster.serving():
        yield cluster


async def through_langgraph_sdk(
    cluster: Cluster, agent: str, answers: list[Answer], start: dict[str, Any]
) -> dict[str, Any]:
    client = get_client(
        url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
        api_key=await cluster.key(PROJECT, email="reviewer@example.com"),
        timeout=60,
    )
    thread = await client.threads.create()
    state: Any = await client.runs.wait(thread["thread_id"], agent, input=start)
    for answer in answers:
        pending = [(i["id"], i["value"]) for i in state.get("__interrupt__", [])]
        assert pending, f"the run ended before the script did: {state}"
        state = await client.runs.wait(
            thread["thread_id"], agent, command={"resume": answer(pending)}
        )
    assert "__interrupt__" not in state and "__error__" not in state, state
    return dict(state)


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_a_docs_pattern_ends_as_in_plain_langgraph_when_distributed(
    patterns_cluster: Cluster, name: str
) -> None:
    factory, answers, compared = SCRIPTS[name]
    start = INPUTS.get(name, GO)
    expected = await plain_langgraph(factory, answers, start)
    got = await through_langgraph_sdk(patterns_cluster, AGENT_OF.get(name, name), answers, start)
    assert {k: got.get(k) for k in compared} == {k: expected.get(k) for k in compared}
    said = [m.content for m in expected.get("messages", []) if m.type == "tool"]
    assert [m["content"] for m in got.get("messages", []) if m.get("type") == "tool"] == said


async def test_a_langgraph_project_runs_distributed_beside_a_broken_agent(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> None:
    """``make up``'s way: the four services as separate processes with INTERLOCK_AGENTS_FILE
    at a project's langgraph.json (a module exporting ``graph``, a helper it imports, no
    PYTHONPATH): its graph runs from its input state through its interrupt, while the broken
    agent beside it fails only its own run."""
    root = project(tmp_path, name="distproj")
    (root / "broken.py").write_text("raise RuntimeError('this agent does not load')\n")
    config = json.loads((root / "langgraph.json").read_text())
    config["graphs"]["broken"] = "./broken.py:graph"
    (root / "langgraph.json").write_text(json.dumps(config))
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path / "cluster")
    cluster.env["INTERLOCK_AGENTS_FILE"] = str(root / "langgraph.json")
    async with cluster.serving():
        client = get_client(
            url=f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}",
            api_key=await cluster.key(PROJECT, email="reviewer@example.com"),
            timeout=60,
        )
        thread = await client.threads.create()
        state: Any = await client.runs.wait(thread["thread_id"], "writer", input={"topic": "x"})
        [pending] = state["__interrupt__"]
        assert pending["value"] == {"draft": "hello x"}
        done: Any = await client.runs.wait(
            thread["thread_id"], "writer", command={"resume": "an edited text"}
        )
        assert done["text"] == "an edited text", done
        other = await client.threads.create()
        # The client raises the run's error, as it does for LangGraph's.
        with pytest.raises(Exception, match=r"AgentNotLoadable: .*this agent does not load"):
            await client.runs.wait(other["thread_id"], "broken", input={"x": 1})
        assert '"agent.unloadable"' in cluster.log_tail("sandbox", 400)
        # Reported where clients and operators look: LangGraph's assistants, the native agents
        # route, and the sandbox's readiness probe (still ready: the others serve).
        assistants = {a["graph_id"]: a["metadata"] for a in await client.assistants.search()}
        assert assistants["writer"] == {"created_by": "system"}
        assert "this agent does not load" in str(assistants["broken"]["load_error"])
        async with httpx.AsyncClient(base_url=cluster.base_url, timeout=10) as http:
            listed = await http.get(
                f"/api/v1/projects/{PROJECT}/agents",
                params={"workspace_id": WORKSPACE},
                headers={"X-API-Key": await cluster.key(PROJECT, email="reviewer@example.com")},
            )
            ready = await http.get(
                f"http://127.0.0.1:{cluster.health_ports[('sandbox', 0)]}/readyz"
            )
        errors = {agent["name"]: agent["load_error"] for agent in listed.json()["items"]}
        assert errors["writer"] is None and "this agent does not load" in errors["broken"]
        assert ready.status_code == 200, ready.text
        assert list(ready.json()["agents_unloadable"]) == ["broken"]
