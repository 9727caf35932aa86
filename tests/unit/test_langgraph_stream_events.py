"""``runs.stream``'s events from Interlock's progress entries and a stopped execution: which
events each stream mode gets, in what order, with which ids. Pure.

Where LangGraph defines the events, they are compared with plain LangGraph's: the same graph
run with ``graph.astream(..., stream_mode=[...], subgraphs=True)``, its parts named as
LangGraph's server names them (``mode|namespace``, checked against ``langgraph dev``), and the
same parts recorded by the sandbox's ``ProgressRecorder`` and made into events by the gateway."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi.sse import ServerSentEvent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agents import claims_assistant
from services.gateway.langgraph.requests import StreamOptions
from services.gateway.langgraph.run_events import EventPosition, RunEvents, parse_event_id
from services.sandbox.jsonable import to_jsonable
from services.sandbox.progress import STREAM_MODES, ProgressRecorder
from shared.domain.execution import Execution, ExecutionStatus, Suspension
from shared.events import PendingInterrupt
from shared.store.memory.progress import InMemoryProgressLog
from shared.store.progress import ProgressEntry, progress_key
from tests.factories import pending

ALL_MODES = ("values", "updates", "messages", "messages-tuple", "custom", "events", "debug")


def entry(epoch: int, seq: int, kind: str, **data: object) -> ProgressEntry:
    return ProgressEntry(key=progress_key(epoch, 1, seq), kind=kind, data=dict(data))


RUN = [
    entry(2, 1, "token", node="agent", text="Hel"),
    entry(2, 2, "token", node="agent", text="lo"),
    entry(2, 3, "update", node="agent", update={"messages": ["Hello"]}),
    entry(2, 4, "update", node="tools", update={"done": True}),
]


def run_events(*modes: str, subgraphs: bool = False, epoch: int = 2) -> RunEvents:
    return RunEvents(StreamOptions(modes, subgraphs), "r", "t", "g", epoch, None)


def named(events: list[ServerSentEvent]) -> list[tuple[str | None, Any]]:
    return [(e.event, e.data) for e in events]


# --- each mode, from entries ------------------------------------------------------------------


def test_updates_mode_gets_each_node_update_and_skips_earlier_runs() -> None:
    earlier = entry(1, 9, "update", node="old", update={})
    events = run_events("updates").progress([earlier, *RUN])
    assert named(events) == [
        ("updates", {"agent": {"messages": ["Hello"]}}),
        ("updates", {"tools": {"done": True}}),
    ]


def test_messages_tuple_mode_gets_each_token_batch_as_a_chunk() -> None:
    events = run_events("messages-tuple").progress(RUN)
    assert [e.event for e in events] == ["messages", "messages"]
    chunks = [e.data[0] for e in events]
    assert [c["content"] for c in chunks] == ["Hel", "lo"]
    assert chunks[0]["id"] == chunks[1]["id"] and chunks[0]["type"] == "AIMessageChunk"
    assert events[0].data[1]["langgraph_node"] == "agent"


def test_messages_mode_gets_metadata_partials_and_the_complete_message() -> None:
    events = run_events("messages").progress(RUN)
    assert [e.event for e in events] == [
        "messages/metadata",
        "messages/partial",
        "messages/partial",
        "messages/complete",
    ]
    assert [e.data[0]["content"] for e in events[1:]] == ["Hel", "Hello", "Hello"]


def test_a_whole_message_is_streamed_whole_in_both_message_modes() -> None:
    message = {"type": "tool", "role": "tool", "id": "m-1", "content": "$240", "tool_call_id": "c"}
    events = run_events("messages-tuple", "messages").progress(
        [entry(2, 1, "message", node="tools", message=message)]
    )
    langchain = {k: v for k, v in message.items() if k != "role"}
    assert named(events) == [
        ("messages", [langchain, events[0].data[1]]),
        ("messages/metadata", {"m-1": {"metadata": events[0].data[1]}}),
        ("messages/complete", [langchain]),
    ]
    assert events[0].data[1]["langgraph_node"] == "tools"


def test_custom_data_and_a_subgraphs_events_by_namespace() -> None:
    entries = [
        entry(2, 1, "custom", data={"progress": "root"}),
        entry(2, 2, "custom", data={"progress": "inner"}, ns="sub:1"),
        entry(2, 3, "update", node="inner", update={"x": 1}, ns="sub:1"),
        entry(2, 4, "message", node="inner", message={"type": "ai", "id": "m", "content": "hi"}),
    ]
    with_subgraphs = run_events("custom", "updates", subgraphs=True).progress(entries)
    assert named(with_subgraphs) == [
        ("custom", {"progress": "root"}),
        ("custom|sub:1", {"progress": "inner"}),
        ("updates|sub:1", {"inner": {"x": 1}}),
    ]
    # Without subgraphs a subgraph's updates and custom data are left out, as in LangGraph.
    assert named(run_events("custom", "updates").progress(entries)) == [
        ("custom", {"progress": "root"})
    ]
    # ...but its messages are streamed, without a namespace.
    inner = [entry(2, 1, "message", node="n", message={"type": "ai", "id": "m"}, ns="sub:1")]
    assert [e.event for e in run_events("messages-tuple").progress(inner)] == ["messages"]
    both = run_events("messages-tuple", subgraphs=True).progress(inner)
    assert [e.event for e in both] == ["messages|sub:1"]
    # The messages mode is never namespaced (LangGraph's server sends it so).
    plain = run_events("messages", subgraphs=True).progress(inner)
    assert [e.event for e in plain] == ["messages/metadata", "messages/complete"]


def test_the_first_values_are_the_state_the_sandbox_recorded_at_the_start() -> None:
    start = entry(2, 0, "values", values={"messages": ["earlier", "new"]})
    events = run_events("values").progress([start, *RUN])
    assert named(events) == [("values", {"messages": ["earlier", "new"]})]
    # A sandbox that recorded none (a state too big, or the release before): the fallback.
    fallback = RunEvents(StreamOptions(("values",)), "r", "t", "g", 2, {"messages": ["new"]})
    assert named(fallback.progress(RUN)) == [("values", {"messages": ["new"]})]


# --- the stop ---------------------------------------------------------------------------------


def suspended_at(epoch: int) -> Execution:
    suspension = Suspension(
        suspension_id=epoch,
        suspend_context={"value": "ok?"},
        allowed_decisions=["approve"],
        interrupt_ids=["i-1"],
        suspended_at=datetime.now(UTC),
        interrupts=[PendingInterrupt(interrupt_id="i-1", value="ok?")],
        values={"step": 2},
    )
    return pending().model_copy(
        update={"status": ExecutionStatus.SUSPENDED, "epoch": epoch, "suspension": suspension}
    )


def test_a_run_stopped_at_an_interrupt_ends_with_it_and_its_state() -> None:
    events = run_events("updates", "values", "messages")
    events.progress(RUN[:2])  # a message left open by the stop
    interrupt = [{"value": "ok?", "id": "i-1"}]
    assert named(events.closing(suspended_at(2))) == [
        ("messages/complete", [_complete("Hello")]),
        ("updates", {"__interrupt__": interrupt}),
        ("values", {"step": 2, "__interrupt__": interrupt}),
    ]


def _complete(text: str) -> dict[str, Any]:
    return {
        "content": text,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "ai",
        "name": None,
        "id": "run-r-1",
        "tool_calls": [],
        "invalid_tool_calls": [],
        "usage_metadata": None,
    }


def test_a_run_that_recorded_nothing_before_its_stop_shows_the_state_it_stopped_with() -> None:
    events = RunEvents(StreamOptions(("values",)), "r", "t", "g", 2, {"messages": ["new"]})
    interrupt = [{"value": "ok?", "id": "i-1"}]
    assert named([*events.opening(), *events.closing(suspended_at(2))]) == [
        ("metadata", {"run_id": "r", "thread_id": "t", "attempt": 1}),
        ("values", {"step": 2, "__interrupt__": interrupt}),
    ]


def test_a_run_a_later_run_followed_ends_with_what_its_entries_left_open_only() -> None:
    """Joined once its turn ran on (a decision resumed it): its stop is the later run's start,
    not kept, so nothing of the execution as it is now is shown as this run's end."""
    events = run_events("messages", "values", "updates")
    events.progress(RUN[:2])
    running_on = pending().model_copy(update={"status": ExecutionStatus.RUNNING, "epoch": 3})
    assert named(events.closing(running_on, superseded=True)) == [
        ("messages/complete", [_complete("Hello")])
    ]


def test_a_failed_run_ends_with_an_error_event() -> None:
    failed = pending().model_copy(
        update={
            "status": ExecutionStatus.ERROR,
            "epoch": 1,
            "error": {"error_type": "Boom", "message": "it broke"},
        }
    )
    [event] = run_events("values", epoch=1).closing(failed)
    assert (event.event, event.data) == ("error", {"error": "Boom", "message": "it broke"})


# --- ids, and a join that replays -------------------------------------------------------------


def test_every_event_has_an_id_in_stream_order_and_the_same_entries_make_the_same_ids() -> None:
    def whole_stream() -> list[ServerSentEvent]:
        events = run_events(*ALL_MODES)
        return [*events.opening(), *events.progress(RUN), *events.closing(suspended_at(2))]

    first, again = whole_stream(), whole_stream()
    ids = [e.id for e in first]
    assert None not in ids and len(set(ids)) == len(ids)
    positions = [parse_event_id(str(i)) for i in ids]
    assert positions == sorted(p for p in positions if p is not None)
    assert [(e.id, e.event) for e in again] == [(e.id, e.event) for e in first]
    assert parse_event_id("-1") is None
    # Each event is named by the entry it was made from, and numbered within it.
    of_second_batch = [parse_event_id(str(e.id)) for e in first if RUN[1].key in str(e.id)]
    assert of_second_batch == [EventPosition(RUN[1].key, n) for n in range(len(of_second_batch))]
    assert len(of_second_batch) > 1


def test_an_id_no_stream_sent_is_refused() -> None:
    for bad in ("", "12", "abc-1", "000001.0001.000001"):
        try:
            parse_event_id(bad)
        except ValueError as exc:
            assert "Last-Event-ID" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")


# --- events and debug, made from node updates (Agent Inbox reads on_chain_start) --------------


def test_events_mode_tells_each_node_its_model_and_tools_start_and_end() -> None:
    events = run_events("events")
    tool = {"type": "tool", "id": "t-1", "name": "lookup", "content": "$240", "tool_call_id": "c"}
    inner = [
        entry(2, 5, "message", node="tools", message=tool, ns="sub:1"),
        entry(2, 6, "update", node="tools", update={"messages": [tool]}, ns="sub:1"),
    ]
    sent = [*events.progress([entry(2, 0, "values", values={"m": 1}), *RUN, *inner])]
    sent += events.closing(suspended_at(2))
    kinds = [(e.event, e.data["event"], e.data["name"]) for e in sent]
    assert kinds == [
        ("events", "on_chain_start", "g"),
        ("events", "on_chain_start", "agent"),
        ("events", "on_chat_model_start", "model"),
        ("events", "on_chat_model_stream", "model"),
        ("events", "on_chat_model_stream", "model"),
        ("events", "on_chat_model_end", "model"),
        ("events", "on_chain_stream", "agent"),
        ("events", "on_chain_end", "agent"),
        ("events", "on_chain_start", "tools"),
        ("events", "on_chain_stream", "tools"),
        ("events", "on_chain_end", "tools"),
        # A subgraph's too, never namespaced, as LangGraph's astream_events sends them, after
        # the start of the node it runs in (its namespace names it).
        ("events", "on_chain_start", "sub"),
        ("events", "on_chain_start", "tools"),
        ("events", "on_tool_start", "lookup"),
        ("events", "on_tool_end", "lookup"),
        ("events", "on_chain_stream", "tools"),
        ("events", "on_chain_end", "tools"),
        ("events", "on_chain_end", "g"),
    ]
    starts = [e.data for e in sent if e.data["event"] == "on_chain_start"][1:]
    assert [s["metadata"]["langgraph_node"] for s in starts] == ["agent", "tools", "sub", "tools"]
    assert all(s["parent_ids"] == ["r"] for s in starts)
    assert sent[-1].data["data"]["output"] == {
        "step": 2,
        "__interrupt__": [{"value": "ok?", "id": "i-1"}],
    }
    model_end = next(e.data for e in sent if e.data["event"] == "on_chat_model_end")
    assert model_end["data"]["output"]["content"] == "Hello"
    assert model_end["parent_ids"] == ["r", starts[0]["run_id"]]


def test_debug_mode_tells_each_task_and_its_result() -> None:
    sent = run_events("debug").progress(RUN)
    assert [(e.data["type"], e.data["payload"]["name"]) for e in sent] == [
        ("task", "agent"),
        ("task_result", "agent"),
        ("task", "tools"),
        ("task_result", "tools"),
    ]
    assert sent[1].data["payload"]["result"] == {"messages": ["Hello"]}
    assert sent[0].data["payload"]["id"] == sent[1].data["payload"]["id"]
    # A subgraph's tasks, namespaced, with stream_subgraphs only (as updates are).
    # The node running the subgraph is under way from its subgraph's first entry.
    inner = [entry(2, 9, "update", node="n", update={}, ns="sub:1")]
    [outer] = run_events("debug").progress(inner)
    assert (outer.event, outer.data["type"], outer.data["payload"]["name"]) == (
        "debug",
        "task",
        "sub",
    )
    named_as = [
        (e.event, e.data["type"]) for e in run_events("debug", subgraphs=True).progress(inner)
    ]
    assert named_as == [("debug", "task"), ("debug|sub:1", "task"), ("debug|sub:1", "task_result")]


# --- against plain LangGraph ------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """JSON as LangGraph's server sends it (messages without Interlock's ``role``)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "role"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def langgraph_server_events(
    parts: list[tuple[tuple[str, ...], str, Any]], modes: set[str], subgraphs: bool
) -> list[tuple[str, Any]]:
    """What LangGraph's server streams of ``graph.astream(..., subgraphs=True)``'s parts, for
    the progress-made modes: ``updates``, ``custom`` (a subgraph's only with ``subgraphs``,
    named ``mode|ns``) and ``messages-tuple`` (a subgraph's always, namespaced only with
    ``subgraphs``), tokens joined per message (Interlock sends them in batches)."""
    named: list[tuple[str, Any]] = []
    for ns, mode, chunk in parts:
        suffix = f"|{'|'.join(ns)}" if ns else ""
        if mode == "messages" and "messages-tuple" in modes:
            message = _plain(to_jsonable(chunk[0]))
            name = f"messages{suffix if subgraphs else ''}"
            if (
                named
                and message["type"] == "AIMessageChunk"
                and named[-1][0] == name
                and (named[-1][1]["id"] == message["id"])
            ):
                named[-1][1]["content"] += message["content"]
                continue
            named.append((name, message))
        if ns and not subgraphs:
            continue
        if mode == "updates" and "updates" in modes and "__interrupt__" not in chunk:
            named.append((f"updates{suffix}", _plain(to_jsonable(chunk))))
        if mode == "custom" and "custom" in modes:
            named.append((f"custom{suffix}", _plain(to_jsonable(chunk))))
    return named


def interlock_events(
    entries: list[ProgressEntry], modes: set[str], subgraphs: bool
) -> list[tuple[str, Any]]:
    events = RunEvents(StreamOptions(tuple(modes), subgraphs), "r", "t", "g", 1, None)
    named: list[tuple[str, Any]] = []
    for event in events.progress(entries):
        name = str(event.event)
        data = event.data[0] if name.startswith("messages") else event.data
        if (
            name.startswith("messages")
            and named
            and named[-1][0] == name
            and (data["type"] == "AIMessageChunk" and named[-1][1]["id"] == data["id"])
        ):
            named[-1][1]["content"] += data["content"]
            continue
        if name.startswith("messages") and data.get("tool_call_chunks") == []:
            data = {k: v for k, v in data.items() if k != "tool_call_chunks"}
        named.append((name, _plain(data)))
    return named


async def run_both(streaming: bool) -> tuple[list[Any], list[ProgressEntry]]:
    """The claims assistant (a create_agent subgraph, custom progress) to its review, through
    plain LangGraph; the parts it streamed, and the entries the sandbox records of them."""
    build = claims_assistant.build_graph_streaming if streaming else claims_assistant.build_graph
    graph = build(InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    parts: list[Any] = []
    log = InMemoryProgressLog()
    recorder = ProgressRecorder(log, project_id="p", execution_id="e", epoch=1, attempt=1)
    start: Any = {"messages": [{"role": "user", "content": "refund CLM-4821"}]}
    for given in (start, None):
        if given is None:
            [pending_review] = (await graph.aget_state(config)).interrupts
            given = Command(resume={pending_review.id: {"decisions": [{"type": "approve"}]}})
        async for part in graph.astream(given, config, stream_mode=STREAM_MODES, subgraphs=True):
            parts.append(part)
            await recorder.observe(part[1], part[2], part[0])
    await recorder.flush()
    return parts, await log.after("p", "e", "")


def _without_chunk_fields(events: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Streamed chunks compared by what the clients join: their id, text and tool calls."""
    kept = []
    for name, data in events:
        if isinstance(data, dict) and data.get("type") == "AIMessageChunk":
            data = {
                "id": data["id"],
                "content": data["content"],
                "calls": [(c.get("name"), c.get("args")) for c in data.get("tool_call_chunks", [])],
            }
        kept.append((name, data))
    return kept


async def test_the_streams_match_plain_langgraphs_for_a_model_that_answers_whole() -> None:
    parts, entries = await run_both(streaming=False)
    for subgraphs in (True, False):
        modes = {"updates", "custom", "messages-tuple"}
        expected = langgraph_server_events(parts, modes, subgraphs)
        assert interlock_events(entries, modes, subgraphs) == expected
    # The AI message with its tool call, each tool's result and the answer, each whole.
    whole = [d for n, d in langgraph_server_events(parts, {"messages-tuple"}, False)]
    assert [m["type"] for m in whole] == ["ai", "tool", "ai", "tool", "ai"]
    assert whole[0]["tool_calls"][0]["name"] == "lookup_claim"


async def test_the_streams_match_plain_langgraphs_for_a_model_that_streams_tokens() -> None:
    parts, entries = await run_both(streaming=True)
    modes = {"updates", "custom", "messages-tuple"}
    for subgraphs in (True, False):
        expected = _without_chunk_fields(langgraph_server_events(parts, modes, subgraphs))
        got = _without_chunk_fields(interlock_events(entries, modes, subgraphs))
        assert got == expected
    answer = [d for n, d in interlock_events(entries, {"messages-tuple"}, True) if d["content"]]
    assert answer[-1]["content"].startswith("Done.") and answer[-1]["type"] == "AIMessageChunk"
