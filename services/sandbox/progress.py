"""What an agent does while it runs, for people watching its stream: node updates and model
tokens, taken from LangGraph's ``updates`` and ``messages`` stream modes.

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
from langchain_core.messages import AIMessageChunk

from services.sandbox.jsonable import to_jsonable
from shared.activity import ExecutionActivity
from shared.bus import EventPublisher
from shared.errors import is_transient
from shared.store.progress import ProgressEntry, ProgressLog, progress_key

log = structlog.get_logger(__name__)

STREAM_MODES: list[Literal["updates", "messages"]] = ["updates", "messages"]
FLUSH_SECONDS = 0.25
MAX_ENTRY_BYTES = 32_000
"""A node update bigger than this is reported by name and size only; the execution's result
and the checkpoint keep the whole state."""


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
        self._token_node: str | None = None
        self._last_flush = time.monotonic()

    async def observe(self, mode: str, chunk: Any) -> None:
        """Take one item of ``graph.astream(..., stream_mode=STREAM_MODES)``."""
        if mode == "messages":
            message, metadata = chunk
            # Whole messages also arrive as node updates; only streamed chunks are tokens.
            if isinstance(message, AIMessageChunk) and message.text:
                node = metadata.get("langgraph_node")
                if node != self._token_node:
                    self._close_tokens()
                    self._token_node = node
                self._tokens.append(message.text)
        elif mode == "updates" and isinstance(chunk, dict):
            self._close_tokens()
            for node, update in chunk.items():
                # The interrupt reaches watchers as the review request, once the orchestrator
                # has recorded the suspension (with the decisions it allows): not from here.
                if node != "__interrupt__":
                    self._add("update", _bounded({"node": node, "update": to_jsonable(update)}))
        if time.monotonic() - self._last_flush >= FLUSH_SECONDS:
            await self.flush()

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

    def _close_tokens(self) -> None:
        if self._tokens:
            self._add("token", {"node": self._token_node, "text": "".join(self._tokens)})
            self._tokens = []

    def _add(self, kind: str, data: dict[str, Any]) -> None:
        self._seq += 1
        key = progress_key(self._epoch, self._attempt, self._seq)
        self._pending.append(ProgressEntry(key=key, kind=kind, data=data))


def _bounded(data: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(data))
    if size <= MAX_ENTRY_BYTES:
        return data
    return {"node": data["node"], "truncated": True, "bytes": size}
