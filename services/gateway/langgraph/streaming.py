"""``runs.stream``: a run as LangGraph's server-sent events, pushed as the run goes.

The events come from what Interlock's own execution stream is made of (services/gateway/
stream.py): the sandbox's progress batches (node updates and model tokens) and the orchestrator's
changes, heard on ``execution.activity``. Modes:

- ``updates``: ``{node: update}`` as each node finishes, then ``{"__interrupt__": [...]}`` when
  the run stops at an interrupt;
- ``messages-tuple``: ``[chunk, metadata]`` per batch of model tokens;
  ``messages``: ``messages/metadata`` for a new message, then ``messages/partial`` with the text
  so far, and ``messages/complete`` once its node finishes;
- ``values``: the state when the run starts and when it stops (with ``__interrupt__``): the
  sandbox records the state when a run stops, not after every step.

A run that fails ends with an ``error`` event, and so does a stream whose key was revoked while
it was open (the key re-check of services/gateway/stream.py). Pure but for the reads the caller
passes in.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi.sse import ServerSentEvent

from services.gateway.feed import Watch
from services.gateway.langgraph.views import interrupts_of, result_of, segment_done, values_of
from services.gateway.stream import KEY_REVOKED
from shared.domain.execution import Execution, ExecutionStatus
from shared.store.progress import ProgressEntry, progress_key


@dataclass
class Messages:
    """The model messages a run streams, one per node turn: tokens of one node add to its
    current message until that node's update closes it."""

    run_id: str
    modes: list[str]
    texts: dict[str, str] = field(default_factory=dict)
    """Message id -> text so far, for the messages still open."""
    open_by_node: dict[str | None, str] = field(default_factory=dict)
    count: int = 0

    def tokens(self, node: str | None, text: str) -> list[ServerSentEvent]:
        events = []
        message_id = self.open_by_node.get(node)
        metadata = {"langgraph_node": node, "run_id": self.run_id}
        if message_id is None:
            self.count += 1
            message_id = f"run-{self.run_id}-{self.count}"
            self.open_by_node[node] = message_id
            self.texts[message_id] = ""
            if "messages" in self.modes:
                events.append(
                    ServerSentEvent(
                        event="messages/metadata", data={message_id: {"metadata": metadata}}
                    )
                )
        self.texts[message_id] += text
        if "messages-tuple" in self.modes:
            chunk = {"type": "AIMessageChunk", "content": text, "id": message_id}
            events.append(ServerSentEvent(event="messages", data=[chunk, metadata]))
        if "messages" in self.modes:
            events.append(
                ServerSentEvent(event="messages/partial", data=[self._message(message_id)])
            )
        return events

    def close(self, node: str | None) -> list[ServerSentEvent]:
        message_id = self.open_by_node.pop(node, None)
        if message_id is None:
            return []
        message = self._message(message_id)
        del self.texts[message_id]
        if "messages" not in self.modes:
            return []
        return [ServerSentEvent(event="messages/complete", data=[message])]

    def close_all(self) -> list[ServerSentEvent]:
        return [e for node in list(self.open_by_node) for e in self.close(node)]

    def _message(self, message_id: str) -> dict[str, Any]:
        return {"type": "ai", "content": self.texts[message_id], "id": message_id}


def progress_events(
    entries: list[ProgressEntry], epoch: int, messages: Messages
) -> list[ServerSentEvent]:
    """The events of the run's own progress (entries of earlier runs are skipped)."""
    first = progress_key(epoch, 0, 0)
    events: list[ServerSentEvent] = []
    for entry in entries:
        if entry.key < first:
            continue
        node = entry.data.get("node")
        if entry.kind == "token":
            events.extend(messages.tokens(node, str(entry.data.get("text", ""))))
        elif entry.kind == "update":
            events.extend(messages.close(node))
            if "updates" in messages.modes:
                update = entry.data.get(
                    "update", {k: v for k, v in entry.data.items() if k != "node"}
                )
                events.append(ServerSentEvent(event="updates", data={node: update}))
    return events


def stop_events(execution: Execution, messages: Messages) -> list[ServerSentEvent]:
    """The run stopped: its interrupt, its final state, or its error."""
    events = messages.close_all()
    if execution.status is ExecutionStatus.ERROR:
        error = execution.error or {}
        data = {
            "error": error.get("error_type", "Error"),
            "message": error.get("message", "the run failed"),
        }
        return [*events, ServerSentEvent(event="error", data=data)]
    interrupts = interrupts_of(execution)
    if interrupts and "updates" in messages.modes:
        events.append(ServerSentEvent(event="updates", data={"__interrupt__": interrupts}))
    if "values" in messages.modes:
        events.append(ServerSentEvent(event="values", data=result_of(execution)))
    return events


def ended_error(why: str) -> dict[str, str]:
    """The ``error`` event of a stream its key's re-check ended (``KEY_REVOKED``: a 401 to a
    wait; else the key could not be read again)."""
    return {"error": "Unauthenticated" if why == KEY_REVOKED else "KeyCheckFailed", "message": why}


async def run_events(
    watch: Watch,
    execution: Execution,
    epoch: int,
    thread_id: str,
    messages: Messages,
    reread: Callable[[], Awaitable[Execution]],
    seconds: float,
) -> AsyncIterator[ServerSentEvent]:
    """The run's events from its start to its stop (or ``seconds``, or its watch ending: then
    a comment says to join the run). The watch was registered before the run started, so
    nothing it did is missed."""
    yield ServerSentEvent(
        event="metadata", data={"run_id": messages.run_id, "thread_id": thread_id}
    )
    if "values" in messages.modes:
        yield ServerSentEvent(event="values", data=values_of(execution))
    left = seconds
    while not segment_done(execution, epoch):
        if watch.ended is not None:
            # Its key was revoked (or could not be read again): the client raises the error.
            yield ServerSentEvent(event="error", data=ended_error(watch.ended))
            return
        if left <= 0 or watch.overflowed:
            yield ServerSentEvent(comment="stream closed before the run stopped: join the run")
            return
        started = time.monotonic()
        arrived = await watch.next(left)
        left -= time.monotonic() - started
        if watch.ended is not None:
            continue  # nothing more for this key, whatever arrived with the ending
        for activity in arrived:
            if activity.progress is not None:
                entries = [item.entry() for item in activity.progress]
                for event in progress_events(entries, epoch, messages):
                    yield event
            elif activity.change is not None and (
                activity.change.status.is_terminal
                or activity.change.status is ExecutionStatus.SUSPENDED
            ):
                execution = await reread()
    for event in stop_events(execution, messages):
        yield event
