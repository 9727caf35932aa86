"""Issue 34, Agent Inbox and the UIs' inputs, over the in-process services and the LangGraph
API: Agent Inbox's search and its four answers to a ``HumanInterrupt``, its "mark as resolved"
(``update_state(None, as_node=END)``), Agent Chat UI's approve (``input: {}`` beside the
command), "mark as resolved" (``command.goto``) and regenerate (a checkpoint, no input); each end
state compared with plain LangGraph's for the same graph and the same calls."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agents import conversation, inbox_email, outreach_email
from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import turn_execution_id
from shared.store.api_keys import Role, create_key
from tests.unit.inprocess import World

ROOT = "/langgraph/projects/p1/workspaces/w1"
INBOX = "inbox-email"
ACCEPT = [{"type": "accept", "args": None}]


@dataclass
class Clients:
    owner: httpx.AsyncClient
    member: httpx.AsyncClient


@pytest.fixture
async def api(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Clients]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(built, store=world.store, publisher=world.bus)  # type: ignore[arg-type]
    keys = world.store.api_keys
    _, owner = await create_key(keys, project_id="p1", role=Role.OWNER, name="o", email="o@x.io")
    _, member = await create_key(keys, project_id="p1", role=Role.MEMBER, name="m", email="m@x.io")
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(
            transport=transport, base_url=f"http://gateway{ROOT}", headers={"x-api-key": owner}
        ) as as_owner,
        httpx.AsyncClient(
            transport=transport, base_url=f"http://gateway{ROOT}", headers={"x-api-key": member}
        ) as as_member,
    ):
        yield Clients(as_owner, as_member)


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def started(http: httpx.AsyncClient, agent: str, text: str, **create: Any) -> str:
    thread = (await http.post("/threads", json=create)).json()["thread_id"]
    first = await http.post(
        f"/threads/{thread}/runs/wait", json={"assistant_id": agent, "input": said(text)}
    )
    assert first.status_code == 200, first.text
    return str(thread)


async def run(http: httpx.AsyncClient, thread: str, agent: str, **body: Any) -> httpx.Response:
    return await http.post(f"/threads/{thread}/runs/wait", json={"assistant_id": agent, **body})


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Messages as compared with plain LangGraph's: type and content (ids differ)."""
    return [(m["type"], m["content"]) for m in messages]


async def plain(build: Any, text: str, *steps: Any) -> Any:
    """The same graph in plain LangGraph: the input, then each step (a ``Command`` to invoke,
    or an ``update_state`` as a tuple of its arguments). Returns the state snapshot after each
    step, the input's first."""
    graph = build(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "plain"}}
    await graph.ainvoke(said(text), config)
    snapshots = [await graph.aget_state(config)]
    for step in steps:
        if isinstance(step, tuple):
            await graph.aupdate_state(config, *step)
        else:
            await graph.ainvoke(step, config)
        snapshots.append(await graph.aget_state(config))
    return snapshots


def plain_messages(snapshot: Any) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in snapshot.values["messages"]]


def emails(world: World) -> list[dict[str, Any]]:
    if not world.ledger.exists():
        return []
    lines = world.ledger.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == "email"]


# --- Agent Inbox ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "sent_to"),
    [
        (ACCEPT, "ada@example.com"),
        (
            [
                {
                    "type": "accept",
                    "args": {
                        "action": "send_email",
                        "args": {
                            "to": "ada@example.com",
                            "subject": inbox_email.SUBJECT,
                            "body": "Hello, about your message: reply to ada@example.com",
                        },
                    },
                }
            ],
            "ada@example.com",
        ),
        (
            [
                {
                    "type": "edit",
                    "args": {
                        "action": "send_email",
                        "args": {"to": "bob@example.com", "subject": "S", "body": "B"},
                    },
                }
            ],
            "bob@example.com",
        ),
        ([{"type": "response", "args": "Not this week"}], None),
        ([{"type": "ignore", "args": None}], None),
    ],
)
async def test_agent_inbox_answers_a_human_interrupt_as_langgraph_does(
    api: Clients, world: World, response: list[dict[str, Any]], sent_to: str | None
) -> None:
    text = "reply to ada@example.com"
    thread = await started(api.owner, INBOX, text)
    # What Agent Inbox lists: the interrupted threads of its graph, by metadata.
    found = await api.owner.post(
        "/threads/search",
        json={"status": "interrupted", "metadata": {"graph_id": INBOX}, "limit": 10, "offset": 0},
    )
    assert thread in [t["thread_id"] for t in found.json()]
    listed = next(t for t in found.json() if t["thread_id"] == thread)
    [[interrupt]] = listed["interrupts"].values()
    [request] = interrupt["value"]
    assert request["action_request"]["action"] == "send_email"
    assert request["config"]["allow_edit"] is True

    done = await run(api.owner, thread, INBOX, command={"resume": response})
    assert done.status_code == 200, done.text
    assert "__interrupt__" not in done.json()
    assert [e["to"] for e in emails(world)] == ([sent_to] if sent_to else [])
    *_, expected = await plain(inbox_email.build_graph, text, Command(resume=response))
    assert shown(done.json()["messages"]) == plain_messages(expected)
    # As the UIs render them: the person's message as human, the tool's result as a tool's.
    assert [m["type"] for m in done.json()["messages"]] == ["human", "ai", "tool", "ai"]
    assert all(m["id"] for m in done.json()["messages"])
    ai, tool = done.json()["messages"][1:3]
    assert tool["tool_call_id"] == ai["tool_calls"][0]["id"]
    state = (await api.owner.get(f"/threads/{thread}")).json()
    assert state["status"] == "idle"
    turn = await world.execution(turn_execution_id("p1", "w1", thread, 1))
    assert turn.decisions[-1].resume == response
    assert turn.decisions[-1].decision == response[0]["type"]


async def test_an_answer_agent_inbox_may_not_give_is_refused_naming_what_it_may(
    api: Clients, world: World
) -> None:
    thread = await started(api.owner, INBOX, "reply to ada@example.com, no edits")
    edit = [{"type": "edit", "args": {"action": "send_email", "args": {"to": "x@y.io"}}}]
    refused = await run(api.owner, thread, INBOX, command={"resume": edit})
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert "allowed: accept, response, ignore" in refused.json()["detail"]
    assert (await api.owner.get(f"/threads/{thread}")).json()["status"] == "interrupted"
    assert emails(world) == []
    accepted = await run(api.owner, thread, INBOX, input={}, command={"resume": ACCEPT})
    assert accepted.status_code == 200, accepted.text
    assert [e["to"] for e in emails(world)] == ["ada@example.com"]


async def test_update_state_as_end_answers_the_review_and_ends_the_turn_where_it_stands(
    api: Clients, world: World
) -> None:
    """Agent Inbox's "mark as resolved": LangGraph drops the interrupt and keeps the state."""
    text = "reply to ada@example.com"
    thread = await started(api.owner, INBOX, text)
    body = {"values": None, "as_node": "__end__"}
    member = await api.member.post(f"/threads/{thread}/state", json=body)
    assert member.status_code == 403, member.text
    written = await api.owner.post(f"/threads/{thread}/state", json=body)
    assert written.status_code == 200, written.text
    assert written.json()["checkpoint"]["checkpoint_id"] == "epoch-2"
    state = (await api.owner.get(f"/threads/{thread}/state")).json()
    *_, expected = await plain(inbox_email.build_graph, text, (None, "__end__"))
    assert (state["next"], state["tasks"], state["interrupts"]) == ([], [], [])
    assert shown(state["values"]["messages"]) == plain_messages(expected)
    assert (await api.owner.get(f"/threads/{thread}")).json()["status"] == "idle"
    assert emails(world) == []
    turn = await world.execution(turn_execution_id("p1", "w1", thread, 1))
    assert turn.status is ExecutionStatus.COMPLETED
    assert turn.decisions[-1].decision == "end (update_state as_node=__end__)"
    assert (turn.decisions[-1].reviewer or "").endswith("(o)")
    native = await api.owner.get(
        f"http://gateway/api/v1/projects/p1/executions/{turn.execution_id}",
        params={"workspace_id": "w1"},
    )
    assert native.json()["decisions"][-1]["command"] == {"goto": [], "update": None, "end": True}
    # Any other update of a thread waiting for a review stays refused: the review owns it.
    waiting = await started(api.owner, INBOX, text)
    busy = await api.owner.post(
        f"/threads/{waiting}/state", json={"values": said("note"), "as_node": "tools"}
    )
    assert busy.status_code == 409, busy.text


# --- Agent Chat UI ----------------------------------------------------------------------------


async def test_chat_ui_approves_with_an_empty_input_beside_the_command(api: Clients) -> None:
    thread = await started(api.owner, "outreach-email", "send an email")
    approve = {"resume": {"decisions": [{"type": "approve"}]}}
    done = await run(api.owner, thread, "outreach-email", input={}, command=approve)
    assert done.status_code == 200, done.text
    *_, expected = await plain(outreach_email.build_graph, "send an email", Command(**approve))
    assert shown(done.json()["messages"]) == plain_messages(expected)


async def head_checkpoint(http: httpx.AsyncClient, thread: str) -> dict[str, Any]:
    """What ``useStream`` (fetchStateHistory) sends beside every submit: the history's head."""
    history = (await http.post(f"/threads/{thread}/history", json={"limit": 10})).json()
    return dict(history[0]["checkpoint"])


async def test_use_stream_names_the_head_checkpoint_beside_each_command_and_input(
    api: Clients, world: World
) -> None:
    """The hook sends the thread's head beside an approve and beside the next message: in
    LangGraph that is where the thread stands, so both run as they would without it."""
    agent, approve = "outreach-email", {"resume": {"decisions": [{"type": "approve"}]}}
    thread = await started(api.owner, agent, "send an email")
    head = await head_checkpoint(api.owner, thread)
    done = await run(api.owner, thread, agent, input={}, command=approve, checkpoint=head)
    assert done.status_code == 200, done.text
    second = await run(
        api.owner,
        thread,
        agent,
        input=said("send another"),
        checkpoint=await head_checkpoint(api.owner, thread),
    )
    assert second.status_code == 200, second.text
    assert second.json()["__interrupt__"]
    # The next turn continues the thread from its first, whose messages come before it.
    turn = await world.execution(turn_execution_id("p1", "w1", thread, 2))
    assert turn.input.turn is not None
    assert turn.input.turn.base == turn_execution_id("p1", "w1", thread, 1)
    types = [m["type"] for m in second.json()["messages"]]
    assert types == ["human", "ai", "tool", "ai", "human", "ai"]
    # A command beside any checkpoint but the review's: a clear 409, the review untouched.
    stale = await run(api.owner, thread, agent, input={}, command=approve, checkpoint=head)
    assert stale.status_code == 409, stale.text
    assert stale.json()["type"].endswith("checkpoint-moved")
    assert "turn-2-epoch-1" in stale.json()["detail"]
    assert (await api.owner.get(f"/threads/{thread}")).json()["status"] == "interrupted"
    current = await head_checkpoint(api.owner, thread)
    finished = await run(api.owner, thread, agent, input={}, command=approve, checkpoint=current)
    assert finished.status_code == 200, finished.text
    assert len(finished.json()["messages"]) == 8


async def test_mark_as_resolved_goes_to_end_as_langgraph_does(api: Clients, world: World) -> None:
    """``Command(goto=END)`` alone: in LangGraph the reviewing node runs again and interrupts
    again (the same review); here too, as a decision recorded with who gave it."""
    thread = await started(api.owner, "outreach-email", "send an email")
    before = (await api.owner.get(f"/threads/{thread}/state")).json()
    resolved = await run(api.owner, thread, "outreach-email", input={}, command={"goto": "__end__"})
    assert resolved.status_code == 200, resolved.text
    goto = Command(goto="__end__")
    asked, expected = await plain(outreach_email.build_graph, "send an email", goto)
    # The same review before and after, as in LangGraph (its ids are its own thread's).
    assert [i.id for i in expected.interrupts] == [i.id for i in asked.interrupts]
    assert [i["id"] for i in resolved.json()["__interrupt__"]] == [
        i["id"] for i in before["interrupts"]
    ]
    assert shown(resolved.json()["messages"]) == plain_messages(expected)
    turn = await world.execution(turn_execution_id("p1", "w1", thread, 1))
    assert turn.status is ExecutionStatus.SUSPENDED and turn.epoch == 2
    assert turn.decisions[-1].decision == "goto __end__"
    approve = {"resume": {"decisions": [{"type": "approve"}]}}
    done = await run(api.owner, thread, "outreach-email", input={}, command=approve)
    *_, finished = await plain(
        outreach_email.build_graph, "send an email", goto, Command(**approve)
    )
    assert shown(done.json()["messages"]) == plain_messages(finished)


async def test_resume_with_update_and_goto_as_langgraph_applies_them(
    api: Clients, world: World
) -> None:
    text = "refund my order"
    thread = await started(api.owner, "conversation", text)
    command = {"resume": "approve", "update": {"messages": [{"role": "user", "content": "also"}]}}
    done = await run(api.owner, thread, "conversation", command=command)
    assert done.status_code == 200, done.text
    *_, expected = await plain(conversation.build_graph, text, Command(**command))
    assert shown(done.json()["messages"]) == plain_messages(expected)
    assert (
        "update messages"
        in (await world.execution(turn_execution_id("p1", "w1", thread, 1))).decisions[-1].decision
    )
    # A goto to a node the graph does not have is refused by the sandbox, which keeps the
    # review (LangGraph would drop it with a warning), and says why in the audit.
    waiting = await started(api.owner, "conversation", text)
    typo = await run(api.owner, waiting, "conversation", command={"resume": "approve", "goto": "x"})
    assert typo.status_code == 200, typo.text
    assert typo.json()["__interrupt__"]
    turn = await world.execution(turn_execution_id("p1", "w1", waiting, 1))
    assert turn.status is ExecutionStatus.SUSPENDED
    assert any("'x', which the graph does not have" in (e.reason or "") for e in turn.audit)


async def test_regenerate_runs_the_turn_after_the_checkpoint_again(api: Clients) -> None:
    """Agent Chat UI's regenerate: a run with the answer's parent checkpoint and no input."""
    thread = await started(api.owner, "conversation", "one")
    await run(api.owner, thread, "conversation", input=said("two"))
    history = (await api.owner.post(f"/threads/{thread}/history", json={})).json()
    latest = history[0]
    again = await run(api.owner, thread, "conversation", checkpoint=latest["parent_checkpoint"])
    assert again.status_code == 200, again.text
    assert shown(again.json()["messages"]) == shown(latest["values"]["messages"])
    branch = (await api.owner.post(f"/threads/{thread}/history", json={})).json()
    assert [len(h["values"]["messages"]) for h in branch] == [4, 2]
    assert branch[0]["checkpoint"]["checkpoint_id"].startswith("turn-3-")
    # The first answer regenerates from the thread's start.
    first = await run(api.owner, thread, "conversation", checkpoint=branch[1]["parent_checkpoint"])
    assert shown(first.json()["messages"]) == shown(branch[1]["values"]["messages"])
    # Editing the first message forks from the thread's start with the new input.
    edited = await run(
        api.owner,
        thread,
        "conversation",
        input=said("uno"),
        checkpoint=branch[1]["parent_checkpoint"],
    )
    assert [m["content"] for m in edited.json()["messages"]] == [
        "uno",
        "turn 1: you said 'uno'; before: []",
    ]
    # From where the thread stands, nothing followed to run again.
    now = (await api.owner.post(f"/threads/{thread}/history", json={"limit": 1})).json()[0]
    nothing = await run(api.owner, thread, "conversation", checkpoint=now["checkpoint"])
    assert nothing.status_code == 409, nothing.text
    assert nothing.json()["type"].endswith("nothing-to-run")


# --- threads as the UIs search them --------------------------------------------------------------


async def test_a_run_sets_the_graph_and_assistant_in_the_thread_metadata(api: Clients) -> None:
    thread = await started(api.owner, "conversation", "hi", metadata={"graph_id": "custom"})
    shown_meta = (await api.owner.get(f"/threads/{thread}")).json()["metadata"]
    assert (shown_meta["graph_id"], shown_meta["assistant_id"]) == ("conversation", "conversation")
    found = await api.owner.post("/threads/search", json={"metadata": {"graph_id": "conversation"}})
    assert thread in [t["thread_id"] for t in found.json()]


async def test_interrupted_threads_list_the_most_recently_updated_first(api: Clients) -> None:
    threads = [await started(api.owner, INBOX, f"reply to t{n}@example.com") for n in range(3)]
    asked = {"status": "interrupted", "metadata": {"graph_id": INBOX}}
    newest = (await api.owner.post("/threads/search", json=asked)).json()
    assert [t["thread_id"] for t in newest] == threads[::-1]
    oldest = await api.owner.post("/threads/search", json={**asked, "sort_order": "asc"})
    assert [t["thread_id"] for t in oldest.json()] == threads
    page = await api.owner.post("/threads/search", json={**asked, "limit": 1, "offset": 1})
    assert [t["thread_id"] for t in page.json()] == [threads[1]]
    other = await api.owner.post(
        "/threads/search", json={"status": "interrupted", "metadata": {"graph_id": "x"}}
    )
    assert other.json() == []
    wrong = await api.owner.post("/threads/search", json={"sort_by": "name"})
    assert wrong.status_code == 400, wrong.text


async def test_the_native_resume_route_judges_a_human_response_by_the_same_rules(
    api: Clients, world: World
) -> None:
    thread = await started(api.owner, INBOX, "reply to ada@example.com, no edits")
    turn = turn_execution_id("p1", "w1", thread, 1)
    route = f"http://gateway/api/v1/projects/p1/executions/{turn}/resume"
    edit = [{"type": "edit", "args": {"action": "send_email", "args": {"to": "x@y.io"}}}]
    refused = await api.owner.post(route, params={"workspace_id": "w1"}, json={"resume": edit})
    assert refused.status_code == 400, refused.text
    assert "allowed: accept, response, ignore" in refused.json()["detail"]
    accepted = await api.owner.post(route, params={"workspace_id": "w1"}, json={"resume": ACCEPT})
    assert accepted.status_code == 202, accepted.text
    assert (await world.execution(turn)).status is ExecutionStatus.COMPLETED
    assert [e["to"] for e in emails(world)] == ["ada@example.com"]
