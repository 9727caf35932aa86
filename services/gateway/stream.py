"""``GET .../executions/{id}/stream``: an execution as server-sent events.

Two sources, each with its own cursor, both durable so a reconnecting client misses nothing:

- the execution's audit trail (status changes, rejected decisions), which only ever grows;
  when the newest status is ``suspended`` the ``interrupt`` event carries the review request;
- the progress log the sandbox writes while the agent runs (node updates, model tokens).

Every event's ``id`` is both cursors (``<audit entries seen>/<last progress key>``); a client
sends the last one back as ``Last-Event-ID`` (browsers do so on their own) and gets only what
came after it. FerretDB has no change streams, so the gateway polls the two sources for each
open stream; one execution read and one progress range query per interval.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from services.gateway.auth import ANY_ROLE, access
from services.gateway.intake import ExecutionNotFound, Intake
from services.gateway.problems import Problem
from services.gateway.routes import PROBLEM_RESPONSES
from services.gateway.schemas import ExecutionView
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.progress import ProgressEntry

RETRY_MS = 2_000


class Until(StrEnum):
    END = "end"
    SUSPENDED = "suspended"


class StreamEnded(Exception):
    """The client has every event of a finished execution."""


def install_stream(app: FastAPI, intake: Intake, keys: ApiKeys, *, poll_seconds: float) -> None:
    async def ended(_: Request, __: Exception) -> Response:
        return Response(status_code=204)

    app.add_exception_handler(StreamEnded, ended)
    app.include_router(build_stream_router(intake, keys, poll_seconds=poll_seconds))


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


def progress_events(
    entries: list[ProgressEntry], cursor: StreamCursor
) -> tuple[list[ServerSentEvent], StreamCursor]:
    events = []
    for entry in entries:
        cursor = StreamCursor(cursor.audit, entry.key)
        events.append(ServerSentEvent(event=entry.kind, id=str(cursor), data=entry.data))
    return events, cursor


def audit_events(
    execution: Execution, cursor: StreamCursor
) -> tuple[list[ServerSentEvent], StreamCursor]:
    """Events for the audit entries after the cursor; ``interrupt`` (the review request) after
    the transition into the current suspension, ``end`` after the final status."""
    events = []
    trail = execution.audit
    last_transition = max(
        (i for i, entry in enumerate(trail) if entry.to_status is not None), default=-1
    )
    for index in range(cursor.audit, len(trail)):
        entry = trail[index]
        cursor = StreamCursor(index + 1, cursor.progress)
        name = "status" if entry.to_status is not None else "audit"
        data = {"execution_id": execution.execution_id, **entry.model_dump(mode="json")}
        events.append(ServerSentEvent(event=name, id=str(cursor), data=data))
        if index == last_transition and execution.status is ExecutionStatus.SUSPENDED:
            view = ExecutionView.of(execution).model_dump(mode="json")
            events.append(ServerSentEvent(event="interrupt", id=str(cursor), data=view))
        if index == last_transition and execution.status.is_terminal:
            view = ExecutionView.of(execution).model_dump(mode="json")
            events.append(ServerSentEvent(event="end", id=str(cursor), data=view))
    return events, cursor


def build_stream_router(intake: Intake, keys: ApiKeys, *, poll_seconds: float) -> APIRouter:
    router = APIRouter(responses=PROBLEM_RESPONSES)
    reader = Depends(access(keys, "reading", ANY_ROLE))

    # Checks run as dependencies: they must answer 404/400 before the 200 of the stream is sent.
    async def watched(
        project_id: Identifier,
        execution_id: Identifier,
        workspace_id: Annotated[Identifier, Query()],
        key: ApiKey = reader,
    ) -> Execution:
        try:
            return await intake.get(project_id, workspace_id, execution_id)
        except ExecutionNotFound as exc:
            raise Problem(
                404,
                "execution-not-found",
                "Execution not found",
                f"no execution {execution_id} here",
            ) from exc

    def resume_point(
        execution: Execution = Depends(watched),
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> StreamCursor:
        try:
            cursor = StreamCursor.parse(last_event_id)
        except ValueError as exc:
            raise Problem(400, "invalid-last-event-id", "Invalid Last-Event-ID", str(exc)) from exc
        if execution.status.is_terminal and cursor.audit >= len(execution.audit):
            # The client saw the end: 204 is how SSE tells a browser to stop reconnecting.
            raise StreamEnded
        return cursor

    @router.get(
        "/api/v1/projects/{project_id}/executions/{execution_id}/stream",
        response_class=EventSourceResponse,
        tags=["executions"],
        responses={204: {"description": "The client has every event of a finished execution"}},
    )
    async def stream_execution(
        execution: Execution = Depends(watched),
        cursor: StreamCursor = Depends(resume_point),
        until: Annotated[
            Until,
            Query(
                description="``end`` (default): the stream stays open across suspensions;"
                " ``suspended``: it also closes after an ``interrupt`` event"
            ),
        ] = Until.END,
    ) -> AsyncIterator[ServerSentEvent]:
        """The execution as it happens, as server-sent events: ``status`` and ``audit`` (each
        audit-trail entry), ``update`` (a node finished a step), ``token`` (model output),
        ``interrupt`` (the review request, with the suspension's context and allowed decisions)
        and ``end`` (the final execution; the stream then closes). Send ``Last-Event-ID`` to
        continue after an event."""
        yield ServerSentEvent(comment="interlock execution stream", retry=RETRY_MS)
        while True:
            execution = await intake.get(
                execution.project_id, execution.workspace_id, execution.execution_id
            )
            # Read after the execution: a run's progress is stored before its final status,
            # so once the status is final every entry is here.
            entries = await intake.progress_after(execution, cursor.progress)
            sent, cursor = progress_events(entries, cursor)
            for event in sent:
                yield event
            sent, cursor = audit_events(execution, cursor)
            for event in sent:
                yield event
            if execution.status.is_terminal:
                return
            if until is Until.SUSPENDED and any(e.event == "interrupt" for e in sent):
                return
            await asyncio.sleep(poll_seconds)

    return router
