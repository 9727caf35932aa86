"""A run's server-sent events, as LangGraph's server streams them, made from what Interlock
records: the run's start, the sandbox's progress entries (services/sandbox/progress.py) and the
execution once the run stopped. Pure: the same entries make the same events with the same ids,
so a stream followed live and a join that replays the stored entries agree, and a client that
reconnects with ``Last-Event-ID`` gets exactly the events after the last one it saw.

Modes (``stream_mode``) and what each gets:

- ``values``: the state when the run starts (as the sandbox recorded it: its input applied, or
  the checkpoint it resumes) and when it stops (with ``__interrupt__``);
- ``updates``: ``{node: update}`` as each node finishes, ``{"__interrupt__": [...]}`` at a stop;
- ``messages-tuple`` and ``messages``: services/gateway/langgraph/run_messages.py;
- ``custom``: what nodes wrote with ``get_stream_writer()``;
- ``events`` and ``debug``: services/gateway/langgraph/run_trace.py.

With ``stream_subgraphs`` the events of a subgraph carry its namespace in their name
(``updates|parent:<task id>``); without it a subgraph's updates, custom data and values are left
out and its messages come without a namespace, as in LangGraph.

Every event's id is ``<progress key>-<n>``: the key of the entry it was made from (the run's
start and stop sort before and after every entry of its epoch) and its place among that entry's
events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fastapi.sse import ServerSentEvent

from services.gateway.langgraph.requests import StreamOptions
from services.gateway.langgraph.run_messages import Emitted, MessageModes
from services.gateway.langgraph.run_trace import NodeTrace
from services.gateway.langgraph.views import result_of
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.runs import interrupts_of
from shared.store.progress import ProgressEntry, progress_key

FROM_THE_START = "-1"
"""The ``Last-Event-ID`` that asks for every event of the run (as LangGraph's clients send it)."""
_EVENT_ID = re.compile(r"(?P<key>\d{6}\.\d{4}\.\d{6})-(?P<n>\d{1,6})")


@dataclass(frozen=True, order=True)
class EventPosition:
    """Where an event sorts in its run's stream (its id, parsed)."""

    key: str
    n: int

    def __str__(self) -> str:
        return f"{self.key}-{self.n}"


def parse_event_id(text: str) -> EventPosition | None:
    """The position a ``Last-Event-ID`` names; None for ``-1`` (everything). ValueError for an
    id no stream of Interlock's sent."""
    if text.strip() == FROM_THE_START:
        return None
    match = _EVENT_ID.fullmatch(text.strip())
    if match is None:
        raise ValueError(
            f"Last-Event-ID {text[:80]!r} is not an event id of a run's stream (send the id of"
            f" the last event received, or {FROM_THE_START} for every event of the run)"
        )
    return EventPosition(match["key"], int(match["n"]))


@dataclass
class RunEvents:
    """One run's events, fed its start, its entries in key order and its stop."""

    options: StreamOptions
    run_id: str
    thread_id: str
    graph_id: str
    epoch: int
    fallback_values: dict[str, Any] | None
    """The state shown first when the sandbox recorded none (too big, or a sandbox of the
    release before): the run's input."""
    start_values: dict[str, Any] | None = None
    """The state the run starts from when it is known before the run starts (a resumed run's:
    the state it suspended with), shown at once; else the sandbox's record of it is."""
    started: bool = False
    last_key: str = ""
    """The key of the last entry taken: a pushed batch may repeat what a read found."""
    fallback_count: int = 0
    messages: MessageModes = field(init=False)
    trace: NodeTrace = field(init=False)

    def __post_init__(self) -> None:
        modes = frozenset(self.options.modes)
        self.messages = MessageModes(modes, self.metadata, self._fallback_id)
        self.trace = NodeTrace(modes, self.run_id, self.graph_id, self.metadata, self._suffix)

    def metadata(self, node: str | None, ns: str) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph_id": self.graph_id,
            "assistant_id": self.graph_id,
            "langgraph_node": node,
        }
        if ns:
            data["langgraph_checkpoint_ns"] = ns
        return data

    def _fallback_id(self) -> str:
        self.fallback_count += 1
        return f"run-{self.run_id}-{self.fallback_count}"

    def opening(self) -> list[ServerSentEvent]:
        """The first events: the run's ids, and the state it starts from when known."""
        data = {"run_id": self.run_id, "thread_id": self.thread_id, "attempt": 1}
        emitted: Emitted = [("metadata", data)]
        if self.start_values is not None:
            self.fallback_values = self.start_values
            emitted.extend(self._start(None))
        return self._numbered(progress_key(self.epoch, 0, 0), emitted)

    def progress(self, entries: list[ProgressEntry]) -> list[ServerSentEvent]:
        """The events of the run's entries (those of other runs, or taken already, skipped)."""
        first, after = progress_key(self.epoch, 0, 0), progress_key(self.epoch + 1, 0, 0)
        events: list[ServerSentEvent] = []
        for entry in entries:
            if not first < entry.key < after or entry.key <= self.last_key:
                continue
            self.last_key = entry.key
            emitted: Emitted = []
            if not self.started:
                emitted.extend(self._start(entry))
                if entry.kind == "values":
                    events.extend(self._numbered(entry.key, emitted))
                    continue
            emitted.extend(self._of(entry))
            events.extend(self._numbered(entry.key, emitted))
        return events

    def closing(self, execution: Execution, *, superseded: bool = False) -> list[ServerSentEvent]:
        """The run stopped: its interrupt, its final state, or its error. Of a run a later run
        of its turn followed (``superseded``), only what its entries left open: the state it
        stopped with is not kept (it is the later run's first)."""
        # A run that recorded nothing before it stopped (an interrupt in its first node): the
        # state it stopped with is all there is to show, as its last values.
        emitted: Emitted = [] if self.started else self._start(None, shown=False)
        emitted.extend(self.messages.all_done())
        if not superseded:
            emitted.extend(self._stop(execution))
        return self._numbered(progress_key(self.epoch, 9999, 999999), emitted)

    def _stop(self, execution: Execution) -> Emitted:
        if execution.status is ExecutionStatus.ERROR:
            error = execution.error or {}
            data = {
                "error": error.get("error_type", "Error"),
                "message": error.get("message", "the run failed"),
            }
            return [("error", data)]
        emitted: Emitted = []
        interrupts = interrupts_of(execution)
        if interrupts and "updates" in self.options.modes:
            emitted.append(("updates", {"__interrupt__": interrupts}))
        values = result_of(execution)
        if "values" in self.options.modes:
            emitted.append(("values", values))
        return [*emitted, *self.trace.graph_end(values)]

    def _start(self, entry: ProgressEntry | None, *, shown: bool = True) -> Emitted:
        """The state the run starts from: the sandbox's first entry, when it recorded it."""
        self.started = True
        recorded = entry is not None and entry.kind == "values" and "values" in entry.data
        values = entry.data["values"] if entry is not None and recorded else self.fallback_values
        if not isinstance(values, dict):
            return []
        shown = shown and "values" in self.options.modes
        emitted: Emitted = [("values", values)] if shown else []
        return [*emitted, *self.trace.graph_start(values)]

    def _suffix(self, ns: str) -> str | None:
        """The event name's namespace part, or None when the event is not streamed."""
        if not ns:
            return ""
        return f"|{ns}" if self.options.subgraphs else None

    def _messages_suffix(self, ns: str) -> str:
        # A subgraph's messages are streamed without subgraphs too, only without a namespace.
        return f"|{ns}" if ns and self.options.subgraphs else ""

    def _of(self, entry: ProgressEntry) -> Emitted:
        data = entry.data
        ns, node = str(data.get("ns", "")), data.get("node")
        suffix = self._suffix(ns)
        modes = self.options.modes
        emitted: Emitted = []
        # events are never namespaced and include subgraphs' (LangGraph's astream_events);
        # debug is named and left out as updates are.
        traced = self.trace.wanted
        if entry.kind == "token":
            emitted.extend(self.messages.tokens(data, self._messages_suffix(ns)))
            if traced:
                emitted.extend(self.trace.tokens(ns, node, data))
        elif entry.kind == "message":
            if traced:
                emitted.extend(self.trace.message(ns, node, data.get("message")))
            emitted.extend(self.messages.message(data, self._messages_suffix(ns)))
        elif entry.kind == "update":
            emitted.extend(self.messages.node_done(ns, node))
            update = data.get("update", {k: v for k, v in data.items() if k not in ("node", "ns")})
            if suffix is not None and "updates" in modes:
                emitted.append((f"updates{suffix}", {node: update}))
            if traced:
                emitted.extend(self.trace.updated(ns, node, update))
        elif entry.kind == "custom" and suffix is not None and "custom" in modes and "data" in data:
            emitted.append((f"custom{suffix}", data["data"]))
        return emitted

    def _numbered(self, key: str, emitted: Emitted) -> list[ServerSentEvent]:
        return [
            ServerSentEvent(event=name, data=data, id=str(EventPosition(key, n)))
            for n, (name, data) in enumerate(emitted)
        ]
