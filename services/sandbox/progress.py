"""What an agent does while it runs, for people watching its stream, taken from LangGraph's
``graph.astream(..., stream_mode=STREAM_MODES, subgraphs=True)``:

- ``update``: a node finished a step, with what it wrote (``updates``);
- ``token``: streamed model output, coalesced per message (``messages``, ``AIMessageChunk``),
  with the message's id and any tool-call chunks;
- ``message``: a whole message a node produced that was not streamed (a model that does not
  stream tokens, a tool's result), as LangGraph's ``messages`` mode emits it;
- ``custom``: what a node wrote with ``get_stream_writer()`` (nothing unless it does);
- ``values``: the state when the run starts (its input applied, or the checkpoint it resumes),
  LangGraph's first ``values``, kept only once the run records something else: a run that stops
  before any node reports (an interrupt in its first node) costs no write for it, since the
  state it stops with is the execution's suspension or result anyway. The later ``values`` are
  not kept.

Each entry of a subgraph carries its namespace (``ns``, LangGraph's ``parent:task|child:task``),
so the LangGraph API can serve ``stream_subgraphs``. Entries carry what the gateway needs to
serve every stream mode (services/gateway/langgraph/run_events.py); the native execution stream
shows only the root graph's updates and tokens.

Progress is written in small batches and best-effort: a database hiccup here costs a watcher a
few lines of output, never the run (the checkpoint and the step cache are what a run needs).
Tokens are coalesced per flush so a model streaming a hundred tokens a second does not become
a hundred writes a second.

Each batch is also announced on ``execution.activity`` (shared/activity.py), after the store
write, so the gateways' open streams get it pushed; the store keeps it for streams that open or
reconnect later. The runner flushes before the run's outcome is reported, so a batch is always
announced before the status that follows it.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import structlog
from langchain_core.messages import AIMessageChunk, BaseMessage

from services.sandbox.jsonable import message_to_json, to_jsonable
from shared.activity import ExecutionActivity
from shared.bus import EventPublisher
from shared.errors import is_transient
from shared.store.progress import ProgressEntry, ProgressLog, progress_key

log = structlog.get_logger(__name__)

STREAM_MODES: list[Literal["updates", "messages", "custom", "values"]] = [
    "updates",
    "messages",
    "custom",
    "values",
]
FLUSH_SECONDS = 0.25
MAX_ENTRY_BYTES = 32_000
"""An entry bigger than this goes without its heavy part (a node's update, the state, a message,
custom data), saying how big it was; the execution's result and the checkpoint keep the whole
state."""


class ProgressAnnouncer:
    """Publishes batches of progress to the gateways, best-effort like the log itself."""

    def __init__(self, publisher: EventPublisher, topic: str) -> None:
        self._publisher = publisher
        self._topic = topic

    async def announce(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        event = ExecutionActivity.progressed(project_id, execution_id, entries)
        try:
            await self._publisher.publish(event, self._topic, key=execution_id)
        except Exception as exc:  # a watcher misses a few lines; the run goes on
            log.warning(
                "progress.unannounced",
                execution_id=execution_id,
                entries=len(entries),
                error=repr(exc),
            )


class ProgressRecorder:
    def __init__(
        self,
        log_: ProgressLog,
        *,
        project_id: str,
        execution_id: str,
        epoch: int,
        attempt: int,
        announcer: ProgressAnnouncer | None = None,
    ) -> None:
        self._log = log_
        self._announcer = announcer
        self._project_id = project_id
        self._execution_id = execution_id
        self._epoch = epoch
        self._attempt = attempt
        self._seq = 0
        self._pending: list[ProgressEntry] = []
        self._tokens: list[str] = []
        self._token_of: tuple[str, str | None, str | None] | None = None
        """The message the pending tokens belong to: (namespace, node, message id)."""
        self._started = False
        self._first_state: ProgressEntry | None = None
        """The run's first state, held until another entry is recorded (then stored first)."""
        self._last_flush = time.monotonic()

    async def observe(self, mode: str, chunk: Any, ns: tuple[str, ...] = ()) -> None:
        """Take one item of ``graph.astream(..., stream_mode=STREAM_MODES, subgraphs=True)``
        (``ns`` is the namespace it yields: ``()`` for the root graph)."""
        where = "|".join(ns)
        if mode == "values":
            if ns or self._started:
                return  # only the run's first state is kept; nothing to flush for the others
            self._started = True
            self._seq += 1  # its place, first, whenever it is stored
            key = progress_key(self._epoch, self._attempt, self._seq)
            data = _bounded({"values": to_jsonable(chunk)}, "values")
            self._first_state = ProgressEntry(key=key, kind="values", data=data)
            return
        elif mode == "messages":
            message, metadata = chunk
            node = metadata.get("langgraph_node")
            if isinstance(message, AIMessageChunk):
                self._token(where, node, message)
            elif isinstance(message, BaseMessage):
                self._close_tokens()
                message_entry = {"node": node, "message": message_to_json(message)}
                self._add("message", _bounded(_within(where, message_entry), "message"))
        elif mode == "custom":
            self._close_tokens()
            self._add("custom", _bounded(_within(where, {"data": to_jsonable(chunk)}), "data"))
        elif mode == "updates" and isinstance(chunk, dict):
            self._close_tokens()
            for node, update in chunk.items():
                # The interrupt reaches watchers as the review request, once the orchestrator
                # has recorded the suspension (with the decisions it allows): not from here.
                if node != "__interrupt__":
                    entry = _within(where, {"node": node, "update": to_jsonable(update)})
                    self._add("update", _bounded(entry, "update"))
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            await self.flush()

    def _token(self, where: str, node: str | None, chunk: AIMessageChunk) -> None:
        """Streamed text is coalesced per message until the flush; a chunk of a tool call is an
        entry of its own (its arguments arrive as text the client joins by the call's index)."""
        text = chunk.text
        calls = to_jsonable(chunk.tool_call_chunks) if chunk.tool_call_chunks else None
        if not text and not calls:
            return  # the closing chunk of a stream carries nothing to show
        of = (where, node, chunk.id)
        if of != self._token_of or calls:
            self._close_tokens()
            self._token_of = of
        if text:
            self._tokens.append(text)
        if calls:
            self._close_tokens(calls)

    async def flush(self) -> None:
        self._close_tokens()
        entries, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        if not entries:
            return
        try:
            await self._log.append(self._project_id, self._execution_id, entries)
        except Exception as exc:
            # Progress is best effort (the checkpoint is the record): a store that does not
            # answer now costs these entries, not the run. Anything else is a bug.
            if not is_transient(exc):
                raise
            log.warning(
                "progress.dropped",
                execution_id=self._execution_id,
                entries=len(entries),
                error=str(exc),
            )
        if self._announcer is not None:
            await self._announcer.announce(self._project_id, self._execution_id, entries)

    def _close_tokens(self, tool_call_chunks: Any = None) -> None:
        if (self._tokens or tool_call_chunks) and self._token_of is not None:
            where, node, message_id = self._token_of
            data: dict[str, Any] = {"node": node, "text": "".join(self._tokens)}
            if message_id:
                data["id"] = message_id
            if tool_call_chunks:
                data["tool_call_chunks"] = tool_call_chunks
            self._add("token", _bounded(_within(where, data), "tool_call_chunks"))
            self._tokens = []

    def _add(self, kind: str, data: dict[str, Any]) -> None:
        if self._first_state is not None:
            self._pending.append(self._first_state)
            self._first_state = None
        self._seq += 1
        key = progress_key(self._epoch, self._attempt, self._seq)
        self._pending.append(ProgressEntry(key=key, kind=kind, data=data))


def _within(where: str, data: dict[str, Any]) -> dict[str, Any]:
    """The entry's data with its subgraph's namespace, if it is not the root graph's."""
    return {**data, "ns": where} if where else data


def _bounded(data: dict[str, Any], heavy: str) -> dict[str, Any]:
    """The entry, or without its ``heavy`` part (saying how big it was) beyond the bound."""
    size = len(json.dumps(data))
    if size <= MAX_ENTRY_BYTES:
        return data
    return {**{k: v for k, v in data.items() if k != heavy}, "truncated": True, "bytes": size}
