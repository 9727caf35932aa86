"""LangGraph's assistants routes over the in-process services: the sandbox describes each agent
it loads and publishes it with the agent's version (``publish_agent_versions``), and the
gateway answers ``getGraph``, ``getSchemas`` and ``getSubgraphs`` from the store exactly as
LangGraph's Agent Server answered them for the same graphs
(tests/fixtures/assistants, recorded by ``record.py``); ``search`` and
``count`` by graph id, name and metadata; ``/info`` and ``/ok``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.sandbox.app import publish_agent_versions
from services.sandbox.loading import GraphCache
from shared.agents import load_registry
from shared.domain.versions import AgentVersion
from shared.store.api_keys import Role, create_key
from tests.fixtures.assistants import PATHS, recorded
from tests.unit.inprocess import World

LANGGRAPH = "/langgraph/projects/p1/workspaces/w1"
RECORDED = recorded()
AGENTS = """
[agents.described]
factory = "tests.fixtures.assistants.graphs:build_described"
description = "A graph with a subgraph and its own input, output and context schemas."

[agents.nested]
factory = "tests.fixtures.assistants.graphs:build_nested"

[agents.conversation]
factory = "agents.conversation:build_graph"

[agents.outreach-email]
factory = "agents.outreach_email:build_graph"

[agents.undescribed]
factory = "agents.conversation:build_graph"
"""


@pytest.fixture
async def http(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    await publish_agent_versions(GraphCache(load_registry(agents), world.saver), world.store)
    # As a sandbox of the release before publishes it: a version, no description.
    await world.store.agent_versions.publish(AgentVersion(agent="undescribed", fingerprint="f"))
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", agents_file=agents
    )
    app = create_app(settings, store=world.store, publisher=world.bus)
    _, key = await create_key(world.store.api_keys, project_id="p1", role=Role.READ_ONLY, name="r")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"x-api-key": key},
    ) as client:
        yield client


@pytest.mark.parametrize("graph", ["described", "nested", "conversation", "outreach-email"])
async def test_graphs_and_schemas_are_answered_as_langgraphs_server_answers_them(
    http: httpx.AsyncClient, graph: str
) -> None:
    for path in PATHS:
        answer = await http.get(f"{LANGGRAPH}/assistants/{graph}/{path}")
        assert answer.status_code == 200, f"{path}: {answer.text}"
        # Compared as text: the order of keys and nodes is LangGraph's too.
        expected = RECORDED[graph][path]
        if path == "schemas":
            expected = {**expected, "graph_id": graph}
        assert json.dumps(answer.json()) == json.dumps(expected), f"{graph}: {path}"


async def test_a_graph_drawn_deeper_than_its_subgraphs_is_drawn_whole(
    http: httpx.AsyncClient,
) -> None:
    deep = await http.get(f"{LANGGRAPH}/assistants/nested/graph", params={"xray": "7"})
    assert deep.json() == RECORDED["nested"]["graph?xray=true"]
    flat = await http.get(f"{LANGGRAPH}/assistants/nested/graph", params={"xray": "false"})
    assert flat.json() == RECORDED["nested"]["graph"]


@pytest.mark.parametrize("xray", ["0", "-1", "yes", "1.5"])
async def test_an_xray_that_is_no_depth_is_a_400(http: httpx.AsyncClient, xray: str) -> None:
    answer = await http.get(f"{LANGGRAPH}/assistants/nested/graph", params={"xray": xray})
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert repr(xray) in answer.json()["detail"]


async def test_an_agent_no_sandbox_described_is_a_409_saying_so(http: httpx.AsyncClient) -> None:
    for path in ("graph", "schemas", "subgraphs"):
        answer = await http.get(f"{LANGGRAPH}/assistants/undescribed/{path}")
        assert answer.status_code == 409, answer.text
        assert answer.json()["type"].endswith("/assistant-not-described")
        assert "earlier release" in answer.json()["detail"]
    unknown = await http.get(f"{LANGGRAPH}/assistants/nobody/schemas")
    assert unknown.status_code == 404 and "described" in unknown.json()["detail"]


async def test_assistants_are_searched_and_counted_by_graph_name_and_metadata(
    http: httpx.AsyncClient,
) -> None:
    async def search(**body: Any) -> httpx.Response:
        return await http.post(f"{LANGGRAPH}/assistants/search", json=body)

    async def ids(**body: Any) -> list[str]:
        answer = await search(**body)
        assert answer.status_code == 200, answer.text
        return [a["assistant_id"] for a in answer.json()]

    everyone = ["conversation", "described", "nested", "outreach-email", "undescribed"]
    assert await ids(limit=100) == everyone
    assert await ids(graph_id="nested") == ["nested"]
    assert await ids(name="EMAIL") == ["outreach-email"]  # a part of it, in any case
    assert await ids(metadata={"created_by": "system"}, limit=100) == everyone
    assert await ids(metadata={"created_by": "someone"}) == []
    assert await ids(sort_by="name", sort_order="asc", limit=2) == ["conversation", "described"]
    assert await ids(sort_by="assistant_id", limit=1) == ["undescribed"]  # descending

    page = await search(limit=2, offset=1)
    assert [a["graph_id"] for a in page.json()] == everyone[1:3]
    assert page.headers["x-pagination-total"] == "5"
    assert page.headers["x-pagination-next"] == "3"
    last = await search(limit=2, offset=4)
    assert "x-pagination-next" not in last.headers
    selected = await search(graph_id="described", select=["assistant_id", "description"])
    assert selected.json() == [
        {
            "assistant_id": "described",
            "description": "A graph with a subgraph and its own input, output and context schemas.",
        }
    ]
    [full] = (await search(graph_id="described")).json()
    assert set(full) == {
        "assistant_id",
        "graph_id",
        "config",
        "context",
        "metadata",
        "name",
        "created_at",
        "updated_at",
        "version",
        "description",
    }

    unknown = await search(graph_id="nobody")
    assert unknown.status_code == 404, unknown.text
    assert "described" in unknown.json()["detail"]  # naming the registered ones
    badly_sorted = await search(sort_by="colour")
    assert badly_sorted.status_code == 400, badly_sorted.text

    async def count(**body: Any) -> Any:
        answer = await http.post(f"{LANGGRAPH}/assistants/count", json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    assert await count() == 5
    assert await count(name="e", metadata={"created_by": "system"}) == 5
    assert await count(graph_id="nested") == 1


async def test_info_and_ok_answer_without_a_key_as_langgraphs_server_does(
    http: httpx.AsyncClient,
) -> None:
    transport = http._transport
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as keyless:
        info = await keyless.get(f"{LANGGRAPH}/info")
        assert info.status_code == 200, info.text
        body = info.json()
        # The fields Agent Inbox reads (host.project_id: null names its inbox by a UUID), with
        # the flags saying what is served here.
        assert body["host"]["project_id"] is None
        assert body["flags"] == {
            "assistants": True,
            "crons": True,
            "langsmith": False,
            "langsmith_tracing_replicas": False,
            "langsmith_tracing_session_on_runs": False,
        }
        assert set(body) == {"version", "langgraph_py_version", "flags", "host"}
        ok = await keyless.get(f"{LANGGRAPH}/ok")
        assert ok.json() == {"ok": True, "services": {}}
        checked = await keyless.get(f"{LANGGRAPH}/ok", params={"check_db": 1})
        assert checked.json() == {"ok": True, "services": {"database": "healthy"}}
        malformed = await keyless.get("/langgraph/projects/bad id/workspaces/w1/info")
        assert malformed.status_code == 400, malformed.text
    # A key sent along changes nothing.
    assert (await http.get(f"{LANGGRAPH}/info")).json() == body
