"""``runs.stream``'s events from Interlock's progress entries and a stopped execution: which
events each stream mode gets, and in what order. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

from services.gateway.langgraph.streaming import Messages, progress_events, stop_events
from shared.domain.execution import ExecutionStatus, Suspension
from shared.events import PendingInterrupt
from shared.store.progress import ProgressEntry, progress_key
from tests.factories import pending


def entry(epoch: int, seq: int, kind: str, **data: object) -> ProgressEntry:
    return ProgressEntry(key=progress_key(epoch, 1, seq), kind=kind, data=dict(data))


RUN = [
    entry(2, 1, "token", node="agent", text="Hel"),
    entry(2, 2, "token", node="agent", text="lo"),
    entry(2, 3, "update", node="agent", update={"messages": ["Hello"]}),
    entry(2, 4, "update", node="tools", update={"done": True}),
]


def test_updates_mode_gets_each_node_update_and_skips_earlier_runs() -> None:
    earlier = entry(1, 9, "update", node="old", update={})
    events = progress_events([earlier, *RUN], 2, Messages("r", ["updates"]))
    assert [(e.event, e.data) for e in events] == [
        ("updates", {"agent": {"messages": ["Hello"]}}),
        ("updates", {"tools": {"done": True}}),
    ]


def test_messages_tuple_mode_gets_each_token_batch_as_a_chunk() -> None:
    events = progress_events(RUN, 2, Messages("r", ["messages-tuple"]))
    assert [e.event for e in events] == ["messages", "messages"]
    chunks = [e.data[0] for e in events]
    assert [c["content"] for c in chunks] == ["Hel", "lo"]
    assert chunks[0]["id"] == chunks[1]["id"] and chunks[0]["type"] == "AIMessageChunk"
    assert events[0].data[1]["langgraph_node"] == "agent"


def test_messages_mode_gets_metadata_partials_and_the_complete_message() -> None:
    events = progress_events(RUN, 2, Messages("r", ["messages"]))
    assert [e.event for e in events] == [
        "messages/metadata",
        "messages/partial",
        "messages/partial",
        "messages/complete",
    ]
    assert [e.data[0]["content"] for e in events[1:]] == ["Hel", "Hello", "Hello"]


def test_a_run_stopped_at_an_interrupt_ends_with_it_and_its_state() -> None:
    suspension = Suspension(
        suspension_id=2,
        suspend_context={"value": "ok?"},
        allowed_decisions=["approve"],
        interrupt_ids=["i-1"],
        suspended_at=datetime.now(UTC),
        interrupts=[PendingInterrupt(interrupt_id="i-1", value="ok?")],
        values={"step": 2},
    )
    stopped = pending().model_copy(
        update={"status": ExecutionStatus.SUSPENDED, "epoch": 2, "suspension": suspension}
    )
    messages = Messages("r", ["updates", "values", "messages"])
    progress_events(RUN[:2], 2, messages)  # a message left open by the stop
    events = stop_events(stopped, messages)
    interrupt = [{"value": "ok?", "id": "i-1"}]
    assert [(e.event, e.data) for e in events] == [
        ("messages/complete", [{"type": "ai", "content": "Hello", "id": "run-r-1"}]),
        ("updates", {"__interrupt__": interrupt}),
        ("values", {"step": 2, "__interrupt__": interrupt}),
    ]


def test_a_failed_run_ends_with_an_error_event() -> None:
    failed = pending().model_copy(
        update={
            "status": ExecutionStatus.ERROR,
            "epoch": 1,
            "error": {"error_type": "Boom", "message": "it broke"},
        }
    )
    [event] = stop_events(failed, Messages("r", ["values"]))
    assert (event.event, event.data) == ("error", {"error": "Boom", "message": "it broke"})
