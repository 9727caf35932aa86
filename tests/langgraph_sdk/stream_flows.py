"""Streams as LangChain's UIs read them, driven with ``langgraph-sdk`` alone (issue 34): every
stream mode of a graph with a subgraph, custom progress and a review; ``stream_subgraphs``;
a join after a dropped stream with ``Last-Event-ID``; ``on_disconnect``. The end-to-end tests
run them against the separate-process services and ``interlock dev``."""

from __future__ import annotations

import uuid
from typing import Any

from langgraph_sdk.schema import StreamPart

from tests.eventually import eventually
from tests.langgraph_sdk.flows import Target

CLAIMS = "claims-assistant"
STREAMING = "claims-assistant-streaming"
CONVERSATION = "conversation"
UI_MODES: list[Any] = ["values", "messages-tuple", "custom"]
"""``useStream``'s modes in Agent Chat UI (``values``, then ``messages-tuple`` and ``custom`` for
the messages and custom events it renders)."""


def human(text: str) -> dict[str, Any]:
    """A human message as Agent Chat UI sends it: an id and content blocks."""
    content = [{"type": "text", "text": text}]
    return {"messages": [{"id": str(uuid.uuid4()), "type": "human", "content": content}]}


def messages_of(parts: list[StreamPart]) -> list[dict[str, Any]]:
    """The messages a ``messages-tuple`` stream sent, chunks of one message joined."""
    joined: list[dict[str, Any]] = []
    for part in parts:
        if not part.event.startswith("messages"):
            continue
        message = dict(part.data[0])
        if joined and message["type"] == "AIMessageChunk" and joined[-1]["id"] == message["id"]:
            joined[-1]["content"] += message["content"]
            joined[-1]["tool_call_chunks"] += message.get("tool_call_chunks") or []
            continue
        joined.append(message)
    return joined


async def ui_streams_flow(target: Target) -> None:
    """A claim refunded through Agent Chat UI's stream (``useStream``'s defaults): whole messages
    of a model that does not stream tokens, the subgraph's events namespaced, custom progress,
    the review in the final values; then the decision streamed with ``events`` (Agent Inbox),
    and the streaming model's tokens."""
    client = target.client()
    thread = (await client.threads.create())["thread_id"]
    created: list[dict[str, Any]] = []
    parts = [
        part
        async for part in client.runs.stream(
            thread,
            CLAIMS,
            input=human("Please refund claim CLM-4821"),
            stream_mode=UI_MODES,
            stream_subgraphs=True,
            on_disconnect="cancel",
            on_run_created=created.append,
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and events[1] == "values", events
    assert created == [{"run_id": parts[0].data["run_id"], "thread_id": thread}]
    assert all(p.id for p in parts), "every event carries an id"
    assert {"custom", "values"} <= set(events)
    namespaced = {e.split("|")[0] for e in events if "|" in e}
    assert namespaced == {"messages", "custom"}, events  # values|ns: not recorded (see docs)
    assert [p.data for p in parts if p.event.startswith("custom|")] == [
        {"progress": "looking up CLM-4821"}
    ]
    whole = messages_of(parts)
    assert [m["type"] for m in whole] == ["ai", "tool", "ai"], whole
    assert [c["name"] for c in whole[0]["tool_calls"]] == ["lookup_claim"]
    assert "CLM-4821" in whole[1]["content"] and whole[1]["tool_call_id"]
    assert [c["name"] for c in whole[2]["tool_calls"]] == ["issue_refund"]
    final = parts[-1]
    assert final.event == "values" and final.data["__interrupt__"], final
    [review] = final.data["__interrupt__"]
    assert [r["name"] for r in review["value"]["action_requests"]] == ["issue_refund"]

    # Agent Inbox answers with streamMode "events" and shows the node each on_chain_start names.
    answered = [
        part
        async for part in client.runs.stream(
            thread,
            CLAIMS,
            command={"resume": {review["id"]: {"decisions": [{"type": "approve"}]}}},
            stream_mode="events",
        )
    ]
    started = [
        p.data["metadata"]["langgraph_node"]
        for p in answered
        if p.event == "events" and p.data["event"] == "on_chain_start" and p.data["parent_ids"]
    ]
    assert "assistant" in started, answered
    assert answered[-1].data["event"] == "on_chain_end"
    assert "refunded" in str(answered[-1].data["data"]["output"]["messages"][-2])

    # A model that streams: its tool calls and its answers as chunks (the tools' results whole).
    streamed_thread = (await client.threads.create())["thread_id"]
    streamed = [
        part
        async for part in client.runs.stream(
            streamed_thread,
            STREAMING,
            input=human("refund claim CLM-7"),
            stream_mode=["messages-tuple", "updates", "debug"],
            stream_subgraphs=True,
        )
    ]
    joined = messages_of(streamed)
    assert [m["type"] for m in joined] == ["AIMessageChunk", "tool", "AIMessageChunk"], joined
    assert [c["name"] for c in joined[0]["tool_call_chunks"]] == ["lookup_claim"]
    updates = [p.event for p in streamed if p.event.startswith("updates")]
    assert "updates" in updates and any(u.startswith("updates|assistant:") for u in updates)
    debug = [(p.data["type"], p.data["payload"]["name"]) for p in streamed if p.event == "debug"]
    # The root graph's tasks: the node running the subgraph is under way once it reports.
    assert debug == [("task", "intake"), ("task_result", "intake"), ("task", "assistant")]
    answered_thread = (await client.threads.create())["thread_id"]
    tokens = [
        part
        async for part in client.runs.stream(
            answered_thread, STREAMING, input=human("hello"), stream_mode="messages-tuple"
        )
    ]
    [answer] = messages_of(tokens)
    assert answer["type"] == "AIMessageChunk" and answer["content"] == "Nothing to do.", tokens


async def join_after_a_drop_flow(target: Target) -> str:
    """A stream dropped after a few events, joined again with the last event's id: the events
    missed, exactly, as a join from the run's start (``-1``) shows them. Returns the thread."""
    client = target.client()
    thread = (await client.threads.create())["thread_id"]
    seen: list[StreamPart] = []
    async for part in client.runs.stream(
        thread,
        CLAIMS,
        input=human("refund claim CLM-4821"),
        stream_mode=UI_MODES,
        stream_subgraphs=True,
        stream_resumable=True,
    ):
        seen.append(part)
        if len(seen) == 3:
            break  # the connection drops
    run = seen[0].data["run_id"]

    async def whole_run() -> list[StreamPart]:
        return [
            part
            async for part in client.runs.join_stream(
                thread, run, stream_mode=UI_MODES, last_event_id="-1"
            )
        ]

    everything = await eventually(
        whole_run,
        lambda got: bool(got) and "__interrupt__" in got[-1].data,
        what="the run stopped at its review",
    )
    missed = [
        part
        async for part in client.runs.join_stream(
            thread, run, stream_mode=UI_MODES, last_event_id=str(seen[-1].id)
        )
    ]
    assert seen + missed == everything
    assert (await client.runs.get(thread, run))["status"] == "success"
    return str(thread)


async def on_disconnect_flow(target: Target) -> tuple[str, str]:
    """``on_disconnect='cancel'``: a client that goes away while its run runs cancels it; with
    ``continue`` the run goes on. Returns the cancelled run's thread and run."""
    client = target.client()
    thread = (await client.threads.create())["thread_id"]
    async for part in client.runs.stream(
        thread, CONVERSATION, input=human("wait 20"), on_disconnect="cancel"
    ):
        run = str(part.data["run_id"])
        break  # the client goes away while the run runs
    await eventually(
        lambda: client.runs.get(thread, run),
        lambda got: got["status"] == "interrupted",
        what="the run cancelled",
    )
    kept = (await client.threads.create())["thread_id"]
    async for part in client.runs.stream(
        kept, CONVERSATION, input=human("wait 1"), on_disconnect="continue"
    ):
        continued = str(part.data["run_id"])
        break
    done = await client.runs.join(kept, continued)
    assert "you said" in str(done["messages"][-1]), done
    assert (await client.runs.get(kept, continued))["status"] == "success"
    return str(thread), run
