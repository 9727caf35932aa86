"""An execution's stream as events, from what the store holds or a change the feed carries: the
cursor each event's id is, the audit trail's and the progress log's events, and when a stream
is done. Pure, no I/O (services/gateway/stream.py serves them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi.sse import ServerSentEvent

from services.gateway.schemas import ExecutionView
from shared.activity import ExecutionChange
from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.store.progress import ProgressEntry

NATIVE_KINDS = frozenset({"update", "token"})
"""The progress this stream shows: the root graph's node updates and tokens. The sandbox records
more for the LangGraph API's stream modes (whole messages, custom data, the state a run starts
from, subgraphs' entries: services/sandbox/progress.py)."""


class Until(StrEnum):
    END = "end"
    SUSPENDED = "suspended"


_CURSOR = re.compile(r"(?P<audit>\d{1,9})/(?P<progress>(\d{6}\.\d{4}\.\d{6})?)")


@dataclass(frozen=True)
class StreamCursor:
    audit: int = 0
    """Audit entries already sent."""
    progress: str = ""
    """Key of the last progress entry sent ("" for none)."""

    def __str__(self) -> str:
        return f"{self.audit}/{self.progress}"

    @classmethod
    def parse(cls, text: str | None) -> StreamCursor:
        if not text:
            return cls()
        match = _CURSOR.fullmatch(text.strip())
        if match is None:
            raise ValueError(
                f"Last-Event-ID {text[:80]!r} is not an event id of this stream"
                " (send back the id of the last event received, or nothing to start over)"
            )
        return cls(int(match["audit"]), match["progress"])


@dataclass(frozen=True)
class Snapshot:
    """What the audit events of an execution are made of, from the store or from a change."""

    execution_id: str
    status: ExecutionStatus
    audit: Sequence[AuditEntry]
    view: Callable[[], dict[str, Any]]
    """The execution as the API shows it: the ``interrupt`` and ``end`` events' data."""

    @classmethod
    def of(cls, execution: Execution) -> Snapshot:
        return cls(
            execution.execution_id,
            execution.status,
            execution.audit,
            lambda: ExecutionView.of(execution).model_dump(mode="json"),
        )

    @classmethod
    def of_change(cls, execution_id: str, change: ExecutionChange) -> Snapshot | None:
        """None when the change came without its view (too big to carry)."""
        view = change.view
        if view is None:
            return None
        return cls(execution_id, change.status, change.audit, lambda: view)


def progress_events(
    entries: list[ProgressEntry], cursor: StreamCursor
) -> tuple[list[ServerSentEvent], StreamCursor]:
    """Events for the entries after the cursor (a pushed batch may repeat what was read)."""
    events = []
    for entry in entries:
        if entry.key <= cursor.progress:
            continue
        cursor = StreamCursor(cursor.audit, entry.key)
        if entry.kind in NATIVE_KINDS and "ns" not in entry.data:
            events.append(ServerSentEvent(event=entry.kind, id=str(cursor), data=entry.data))
    return events, cursor


def audit_events(
    snapshot: Snapshot, cursor: StreamCursor
) -> tuple[list[ServerSentEvent], StreamCursor]:
    """Events for the audit entries after the cursor; ``interrupt`` (the review request) after
    the transition into the current suspension, ``end`` after the final status."""
    events = []
    trail = snapshot.audit
    last_transition = max(
        (i for i, entry in enumerate(trail) if entry.to_status is not None), default=-1
    )
    for index in range(cursor.audit, len(trail)):
        entry = trail[index]
        cursor = StreamCursor(index + 1, cursor.progress)
        name = "status" if entry.to_status is not None else "audit"
        data = {"execution_id": snapshot.execution_id, **entry.model_dump(mode="json")}
        events.append(ServerSentEvent(event=name, id=str(cursor), data=data))
        if index == last_transition and snapshot.status is ExecutionStatus.SUSPENDED:
            events.append(ServerSentEvent(event="interrupt", id=str(cursor), data=snapshot.view()))
        if index == last_transition and snapshot.status.is_terminal:
            events.append(ServerSentEvent(event="end", id=str(cursor), data=snapshot.view()))
    return events, cursor


def finished(snapshot: Snapshot, sent: list[ServerSentEvent], until: Until) -> bool:
    if snapshot.status.is_terminal:
        return True
    return until is Until.SUSPENDED and any(e.event == "interrupt" for e in sent)
