"""What LangChain's Agent Inbox and Agent Chat UI send, replayed with ``langgraph-sdk`` alone
against Interlock (issue 34): the e2e tests run these flows against the separate-process
services and ``interlock dev``. The JS client replays the same sequences
(``tests/js/ui-inputs.mjs``).

Agent Inbox lists the interrupted threads of its graph (``threads.search`` by status and
``metadata.graph_id``), reads each thread's ``HumanInterrupt``, and answers it with a list of
one ``HumanResponse`` (accept, edit, response: ``runs.stream``; ignore: ``runs.create``), or
marks it resolved (``threads.update_state(values=None, as_node=END)``). Agent Chat UI sends
``input: {}`` beside every command (approve, and "mark as resolved", ``goto: END``), reloads a
thread's history, and regenerates an answer with a run from its parent checkpoint and no
input."""

from __future__ import annotations

import uuid
from typing import Any

from tests.langgraph_sdk.flows import Target, refused

INBOX = "inbox-email"
CHAT = "outreach-email"
END = "__end__"
ACCEPT = [{"type": "accept", "args": None}]


def human(text: str) -> dict[str, Any]:
    """A message as useStream sends it: an id, ``type``, content blocks."""
    return {"id": str(uuid.uuid4()), "type": "human", "content": [{"type": "text", "text": text}]}


async def drained(stream: Any) -> list[Any]:
    return [part async for part in stream]


def tool_results(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "tool"]


async def inbox_flow(target: Target) -> None:
    """Agent Inbox's sequence: list interrupted threads, then accept, edit, respond, ignore and
    "mark as resolved", each completing; a type the interrupt does not allow is refused."""
    client = target.client()
    to = f"{uuid.uuid4().hex[:8]}@example.com"
    answers = ["accept", "edit", "response", "ignore", "resolve"]
    threads: dict[str, str] = {}
    for answer in answers:
        thread = await client.threads.create()
        first = await client.runs.wait(
            thread["thread_id"], INBOX, input={"messages": [human(f"reply to {to}")]}
        )
        assert first["__interrupt__"], first
        threads[answer] = thread["thread_id"]

    # The inbox: interrupted threads of its graph, newest first, Agent Inbox's page.
    listed = await client.threads.search(
        status="interrupted", metadata={"graph_id": INBOX}, limit=10, offset=0
    )
    ids = [t["thread_id"] for t in listed]
    assert ids[: len(answers)] == [threads[a] for a in reversed(answers)], ids
    for thread in listed[: len(answers)]:
        assert thread["metadata"]["graph_id"] == INBOX
        [[interrupt]] = thread["interrupts"].values()
        [request] = interrupt["value"]
        assert request["action_request"]["args"]["to"] == to
        assert request["config"] == {
            "allow_accept": True,
            "allow_edit": True,
            "allow_respond": True,
            "allow_ignore": True,
        }

    thread = await client.threads.get(threads["accept"])
    [[interrupt]] = thread["interrupts"].values()
    action_request = interrupt["value"][0]["action_request"]
    # Accept, as Agent Inbox sends it where edits are allowed: the action_request unchanged.
    await drained(
        client.runs.stream(
            threads["accept"],
            INBOX,
            command={"resume": [{"type": "accept", "args": action_request}]},
        )
    )
    edited = {**action_request["args"], "to": f"edited-{to}"}
    edit = [{"type": "edit", "args": {"action": "send_email", "args": edited}}]
    await drained(client.runs.stream(threads["edit"], INBOX, command={"resume": edit}))
    response = [{"type": "response", "args": "Not this week"}]
    await drained(client.runs.stream(threads["response"], INBOX, command={"resume": response}))
    ignored = await client.runs.create(
        threads["ignore"], INBOX, command={"resume": [{"type": "ignore", "args": None}]}
    )
    await client.runs.join(threads["ignore"], ignored["run_id"])
    await client.threads.update_state(threads["resolve"], None, as_node=END)

    results = {}
    for answer, thread_id in threads.items():
        done = await client.threads.get(thread_id)
        assert done["status"] == "idle", (answer, done)
        assert done["interrupts"] == {}
        results[answer] = tool_results(done["values"])
        assert [m["type"] for m in done["values"]["messages"]][:2] == ["human", "ai"]
    assert results == {
        "accept": [f"Sent 'Following up' to {to}."],
        "edit": [f"Sent 'Following up' to edited-{to}."],
        "response": ["Not sent. The reviewer said: Not this week"],
        "ignore": ["Not sent: the reviewer ignored it."],
        "resolve": [],
    }
    # Gone from the inbox once answered.
    after = await client.threads.search(
        status="interrupted", metadata={"graph_id": INBOX}, limit=100
    )
    assert not set(threads.values()) & {t["thread_id"] for t in after}

    # A response the interrupt does not allow: 400 naming what it allows, nothing recorded.
    strict = await client.threads.create()
    await client.runs.wait(
        strict["thread_id"], INBOX, input={"messages": [human(f"reply to {to}, no edits")]}
    )
    problem = await refused(
        client.runs.wait(strict["thread_id"], INBOX, command={"resume": edit}), 400
    )
    assert "allowed: accept, response, ignore" in problem["detail"]
    assert (await client.threads.get(strict["thread_id"]))["status"] == "interrupted"
    done = await client.runs.wait(strict["thread_id"], INBOX, command={"resume": ACCEPT})
    assert tool_results(done) == [f"Sent 'Following up' to {to}."]


async def chat_ui_flow(target: Target) -> None:
    """Agent Chat UI's sequence on a reviewed agent: first message, the review, "mark as
    resolved" (the review stays, as in LangGraph), approve, a second message, reload, and
    regenerate."""
    client = target.client()
    thread_id = (await client.threads.create())["thread_id"]
    parts = await drained(
        client.runs.stream(
            thread_id,
            CHAT,
            input={"messages": [human("send an email")]},
            stream_mode=["values"],
            stream_resumable=True,
        )
    )
    assert parts[-1].data["__interrupt__"], parts[-1]
    state = await client.threads.get_state(thread_id)
    [interrupt] = state["interrupts"]
    [request] = interrupt["value"]["action_requests"]
    assert request["name"] == "send_email"

    resolved = await drained(
        client.runs.stream(thread_id, CHAT, input={}, command={"goto": END}, stream_mode="values")
    )
    # LangGraph runs the reviewing node again, which asks the same review again.
    assert [i["id"] for i in resolved[-1].data["__interrupt__"]] == [interrupt["id"]]
    assert (await client.threads.get(thread_id))["status"] == "interrupted"

    approve = {"resume": {"decisions": [{"type": "approve"}]}}
    await drained(client.runs.stream(thread_id, CHAT, input={}, command=approve))
    first = await client.threads.get_state(thread_id)
    assert [m["type"] for m in first["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert first["values"]["messages"][0]["content"] == [{"type": "text", "text": "send an email"}]

    await drained(
        client.runs.stream(thread_id, CHAT, input={"messages": [human("send another email")]})
    )
    await drained(client.runs.stream(thread_id, CHAT, input={}, command=approve))
    history = await client.threads.get_history(thread_id, limit=10)
    assert [len(h["values"]["messages"]) for h in history] == [8, 4]
    assert history[0]["parent_checkpoint"] == history[1]["checkpoint"]
    assert history[1]["parent_checkpoint"]["checkpoint_id"] == "epoch-0"
    ids = [m["id"] for m in history[0]["values"]["messages"]]
    assert all(ids) and len(set(ids)) == len(ids)

    # Regenerate the last answer: its first state's parent, no input.
    answer = history[0]["values"]["messages"][-1]
    seen = [h for h in history if answer["id"] in [m["id"] for m in h["values"]["messages"]]]
    parent = seen[-1]["parent_checkpoint"]
    again = await drained(
        client.runs.stream(thread_id, CHAT, checkpoint=parent, stream_mode=["values"])
    )
    assert again[-1].data["__interrupt__"], again[-1]
    await drained(client.runs.stream(thread_id, CHAT, input={}, command=approve))
    branch = await client.threads.get_history(thread_id, limit=10)
    assert [len(h["values"]["messages"]) for h in branch] == [8, 4]
    assert branch[1]["checkpoint"] == history[1]["checkpoint"]
    assert branch[0]["checkpoint"] != history[0]["checkpoint"]
    regenerated = branch[0]["values"]["messages"]
    assert [m["type"] for m in regenerated] == [m["type"] for m in history[0]["values"]["messages"]]
    assert regenerated[4]["content"] == history[0]["values"]["messages"][4]["content"]
