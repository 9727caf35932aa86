"""Connecting and describing (issue 34, items 1 and 4), as a browser-based client meets
Interlock: ``/info`` and ``/ok`` with no key, a CORS preflight from an allowed page and from
another, a run driven with JSON sent as ``text/plain`` (Agent Chat UI's passthrough), and the
assistants described through ``langgraph-sdk`` as LangGraph's server describes the same graphs
(tests/fixtures/assistants). Run against the separate-process services and ``interlock dev``."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.fixtures.assistants import recorded
from tests.langgraph_sdk.flows import REFUND, REFUND_INPUT, Target, refused

PASSTHROUGH = {"content-type": "text/plain;charset=UTF-8"}
"""How langgraph-nextjs-api-passthrough forwards a JSON body."""
RECORDED = recorded()


async def connect_flow(target: Target, origin: str) -> None:
    """What a UI does first, from a page of ``origin`` (which the gateway allows)."""
    async with httpx.AsyncClient(base_url=target.url, timeout=60) as http:
        # Agent Inbox asks /info with no key, declaring a JSON body it does not send.
        info = await http.get("/info", headers={"content-type": "application/json"})
        assert info.status_code == 200, info.text
        assert info.json()["flags"]["assistants"] is True
        assert info.json()["host"]["project_id"] is None
        ok = await http.get("/ok", params={"check_db": 1})
        assert ok.json() == {"ok": True, "services": {"database": "healthy"}}

        asked = {
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type,x-api-key,x-auth-scheme",
        }
        preflight = await http.options("/threads/search", headers={"origin": origin, **asked})
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == origin
        stranger = await http.options(
            "/threads/search", headers={"origin": "https://evil.example", **asked}
        )
        assert stranger.status_code == 400
        assert "access-control-allow-origin" not in stranger.headers

        # A review driven the passthrough's way: every JSON body sent as text/plain.
        keyed = {**PASSTHROUGH, "x-api-key": target.owner, "origin": origin}
        thread = await http.post("/threads", content=b"{}", headers=keyed)
        assert thread.status_code == 200, thread.text
        assert thread.headers["access-control-allow-origin"] == origin
        runs = f"/threads/{thread.json()['thread_id']}/runs/wait"
        start = {"assistant_id": REFUND, "input": REFUND_INPUT}
        first = await http.post(runs, content=json.dumps(start), headers=keyed)
        assert first.status_code == 200, first.text
        assert first.json()["__interrupt__"][0]["value"]["allowed_decisions"]
        assert "content-location" in first.headers["access-control-expose-headers"].lower()
        decide = {"assistant_id": REFUND, "command": {"resume": "approve"}}
        done = await http.post(runs, content=json.dumps(decide), headers=keyed)
        assert done.status_code == 200, done.text
        assert done.json()["outcome"] == "refunded", done.json()


async def describe_flow(target: Target) -> None:
    """The assistants searched, counted and described with ``langgraph-sdk``: the example
    agents' graphs and schemas as LangGraph's server answers for them, through the store the
    sandboxes published them in."""
    client = target.client()
    [found] = await client.assistants.search(
        graph_id="conversation", metadata={"created_by": "system"}
    )
    assert found["assistant_id"] == found["graph_id"] == found["name"] == "conversation"
    assert await client.assistants.count(graph_id="conversation") == 1
    assert [a["graph_id"] for a in await client.assistants.search(name="OUTREACH-E")] == [
        "outreach-email",
        "outreach-email-per-call",
    ]

    for graph in ("conversation", "outreach-email"):
        expected = RECORDED[graph]
        assert await client.assistants.get_graph(graph) == expected["graph"], graph
        drawn = await client.assistants.get_graph(graph, xray=True)
        assert drawn == expected["graph?xray=true"], graph
        schemas = await client.assistants.get_schemas(graph)
        assert json.dumps(schemas) == json.dumps({**expected["schemas"], "graph_id": graph})
        subgraphs = await client.assistants.get_subgraphs(graph, recurse=True)
        assert subgraphs == expected["subgraphs?recurse=true"], graph

    refund: dict[str, Any] = await client.assistants.get_graph(REFUND)
    assert {"lookup_claim", "review", "issue_refund"} <= {n["id"] for n in refund["nodes"]}
    problem = await refused(client.assistants.get_schemas("no-such-agent"), 404)
    assert REFUND in problem["detail"]
