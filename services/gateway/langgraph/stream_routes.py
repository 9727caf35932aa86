"""The LangGraph API's streams: ``runs.stream`` (``POST .../runs/stream``, a run started and
followed) and ``runs.join_stream`` (``GET .../threads/{t}/runs/{r}/stream``, a run joined,
its missed events replayed after ``Last-Event-ID``).

Each stream response names its run as LangGraph's server does: ``Content-Location`` is the run
(``useStream``'s ``onRunCreated`` reads it) and ``Location`` its join, with the stream's modes,
where the clients reconnect with ``Last-Event-ID`` when a stream drops or closes (a gateway
restart, the streams' lifetime) before the run stopped.

``on_disconnect='cancel'`` (a join's ``cancel_on_disconnect=1``): the run is cancelled when the
client goes away before it stopped, audited as any cancel, by the key that asked and saying why
(shared/domain/cancellation.py, ``still_under_way``, says which runs are)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

import anyio
import structlog
from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from services.gateway.auth import OWNERS, WRITERS, require_role
from services.gateway.feed import Watch
from services.gateway.langgraph.requests import (
    RunRequest,
    StreamOptions,
    run_request,
    stream_modes,
    unsupported,
)
from services.gateway.langgraph.run_events import RunEvents, parse_event_id
from services.gateway.langgraph.service import WAIT_SECONDS, LangGraphService, Scope
from services.gateway.langgraph.streaming import Replay, StreamEnd, run_events
from services.gateway.openapi import json_body
from services.gateway.problems import Problem
from shared.custom_headers import within_limits
from shared.domain.cancellation import still_under_way
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.runs import run_id, values_of
from shared.errors import InterlockError
from shared.events import Identifier
from shared.store.api_keys import ApiKey
from shared.store.progress import PROGRESS_PAGE, ProgressEntry, progress_key

log = structlog.get_logger(__name__)

PREFIX = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
TAGS: list[str | Any] = ["langgraph"]
RawBody = Annotated[Any, Body(include_in_schema=False)]
CANCEL_SECONDS = 10.0
"""How long cancelling a run its client left may take (the client is gone: nobody waits)."""


@dataclass(frozen=True)
class HeldStream:
    """A run's stream, its run started or found, its watch registered: what the response sends
    is ready before its 200, so a refusal is still a problem document."""

    watch: Watch
    execution: Execution
    events: RunEvents
    end: StreamEnd
    stored: list[ProgressEntry] | None = None
    replay: Replay | None = None


def run_path(thread_id: str, execution_id: str, epoch: int) -> str:
    """Relative to the API's root (the client's ``url``), as the clients resolve it."""
    return f"/threads/{thread_id}/runs/{run_id(execution_id, epoch)}"


def join_location(path: str, options: StreamOptions) -> str:
    """The run's join with this stream's options: where a client reconnects."""
    query: list[tuple[str, str]] = [("stream_mode", mode) for mode in options.modes]
    if options.subgraphs:
        query.append(("stream_subgraphs", "true"))
    return f"{path}/stream?{urlencode(query)}"


def resumed_from(execution: Execution, epoch: int) -> dict[str, Any] | None:
    """The state a resumed run starts from while the execution still holds it: the suspension
    it answers, until the run stops (then the sandbox's record of it is shown)."""
    suspension = execution.suspension
    if epoch == 1 or suspension is None or suspension.values is None:
        return None
    waiting = execution.status is ExecutionStatus.SUSPENDED and execution.epoch == epoch - 1
    under_way = execution.status in (ExecutionStatus.RESUMING, ExecutionStatus.RUNNING)
    running = under_way and execution.epoch == epoch
    return dict(suspension.values) if waiting or running else None


def refuse_namespaces(namespaces: list[str]) -> None:
    """A stream filtered to some subgraphs' namespaces (the clients' ``stream_namespaces``):
    not served, so refused rather than streamed unfiltered."""
    if namespaces:
        raise unsupported(
            "namespace: a stream is not filtered by subgraph; stream_subgraphs streams them all,"
            " each event named with its namespace"
        )


def name_run(response: Response, path: str, options: StreamOptions) -> None:
    response.headers["Content-Location"] = path
    response.headers["Location"] = join_location(path, options)


async def stored_progress(
    service: LangGraphService, execution: Execution, epoch: int
) -> list[ProgressEntry]:
    """The run's progress stored so far (the log answers in pages; entries of later runs of the
    turn end it)."""
    entries: list[ProgressEntry] = []
    after, next_run = progress_key(epoch, 0, 0), progress_key(epoch + 1, 0, 0)
    while True:
        page = await service.intake.progress_after(execution, after)
        entries.extend(e for e in page if e.key < next_run)
        if len(page) < PROGRESS_PAGE or page[-1].key >= next_run:
            return entries
        after = page[-1].key


async def cancel_if_left(
    service: LangGraphService, scope: Scope, execution: Execution, epoch: int, key: ApiKey
) -> None:
    """The client of a stream that asked for it went away: its run is cancelled, unless it had
    stopped. Best effort, since nobody waits for the answer: a failure is logged."""
    # Shielded: the request is over, and a server that cancels what is left of it must not
    # cancel this too.
    with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SECONDS):
        try:
            now = await service.reread(execution)
            if not still_under_way(now, epoch):
                return
            run = run_id(execution.execution_id, epoch)
            await service.intake.cancel(
                project_id=scope.project_id,
                workspace_id=scope.workspace_id,
                execution_id=execution.execution_id,
                reason=f"the client streaming run {run} went away (on_disconnect=cancel)",
                requested_by=key.principal,
            )
            log.info("run.cancelled_on_disconnect", execution_id=execution.execution_id, run=run)
        except InterlockError as exc:  # it ended meanwhile, or the store is away
            log.warning(
                "run.cancel_on_disconnect_failed",
                execution_id=execution.execution_id,
                error=repr(exc),
            )


def add_stream_routes(router: APIRouter, service: LangGraphService, anyone: Any) -> None:
    """The stream routes, on the LangGraph API's router (services/gateway/langgraph/routes.py):
    ``anyone`` is its dependency on a key of any role."""

    async def stream_start(
        request: Request,
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> AsyncIterator[HeldStream]:
        """The run a stream follows, started before the response begins: a refusal (a bad body,
        a missing thread, a decision refused) is still a problem document, not a broken stream.
        The watch outlives the dependency's start and ends with the response."""
        thread_id = request.path_params.get("thread_id")
        body: RunRequest = run_request(raw)
        refuse_namespaces(request.query_params.getlist("namespace"))
        options = body.stream_options()
        if body.on_disconnect == "cancel":
            # The run this request starts, which its key may start: it may end it too.
            require_role(key, "a run cancelled when its client goes (on_disconnect)", WRITERS)
        scope = Scope(project_id, workspace_id)
        async with service.start(
            scope,
            thread_id or str(uuid.uuid4()),
            body,
            key,
            within_limits(request.headers.items()),
            stateless=thread_id is None,
            watch=True,
        ) as (started, watch):
            assert watch is not None
            execution, epoch = started.execution, started.epoch
            thread = started.thread.thread_id
            name_run(response, run_path(thread, execution.execution_id, epoch), options)
            # A new turn's first state is its input on the thread's state, which the sandbox
            # records as it starts; a resumed run starts from the state it suspended with.
            resumes = epoch > 1
            events = RunEvents(
                options,
                run_id(execution.execution_id, epoch),
                thread,
                execution.agent,
                epoch,
                fallback_values=execution.input.graph_input(),
                start_values=values_of(execution) if resumes else None,
            )
            end = StreamEnd()
            yield HeldStream(watch, execution, events, end)
        if body.on_disconnect == "cancel" and not (end.stopped or end.closed):
            await cancel_if_left(service, scope, execution, epoch, key)

    async def join_start(
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        run: Identifier,
        stream_mode: Annotated[list[str] | None, Query()] = None,
        stream_subgraphs: Annotated[bool, Query()] = False,
        cancel_on_disconnect: Annotated[bool, Query()] = False,
        namespace: Annotated[list[str] | None, Query()] = None,
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
        key: ApiKey = anyone,
    ) -> AsyncIterator[HeldStream]:
        """The run joined: watched first, then read (its execution and stored progress), so
        nothing falls between; the events after ``Last-Event-ID`` are sent again."""
        refuse_namespaces(namespace or [])
        options = StreamOptions(stream_modes(stream_mode), stream_subgraphs)
        try:
            after = parse_event_id(last_event_id) if last_event_id else None
        except ValueError as exc:
            raise Problem(400, "invalid-last-event-id", "Invalid Last-Event-ID", str(exc)) from exc
        replay = Replay(after=after, from_now=not last_event_id)
        if cancel_on_disconnect:
            require_role(key, "cancelling a run when its stream's client goes", OWNERS)
        scope = Scope(project_id, workspace_id)
        _, execution, epoch = await service.run_of(scope, thread_id, run)
        async with service.watching(scope, execution.execution_id, key) as watch:
            # Read again once watched: what changed before the watch began is in this read.
            current = await service.reread(execution)
            stored = await stored_progress(service, current, epoch)
            name_run(response, run_path(thread_id, execution.execution_id, epoch), options)
            events = RunEvents(
                options,
                run,
                thread_id,
                execution.agent,
                epoch,
                fallback_values=current.input.graph_input() if epoch == 1 else None,
                start_values=resumed_from(current, epoch),
            )
            end = StreamEnd()
            yield HeldStream(watch, current, events, end, stored, replay)
        if cancel_on_disconnect and not (end.stopped or end.closed):
            await cancel_if_left(service, scope, execution, epoch, key)

    async def stream_of(held: HeldStream) -> AsyncIterator[ServerSentEvent]:
        async def reread() -> Execution:
            return await service.reread(held.execution)

        events = run_events(
            held.watch,
            held.execution,
            held.events,
            reread,
            service.bounds.lifetime(WAIT_SECONDS),
            stored=held.stored,
            replay=held.replay,
            end=held.end,
        )
        async for event in events:
            yield event

    starting = Depends(stream_start)
    run_body = json_body(RunRequest, required=True)

    @router.post(
        f"{PREFIX}/threads/{{thread_id}}/runs/stream",
        tags=TAGS,
        openapi_extra=run_body,
        response_class=EventSourceResponse,
    )
    async def stream_thread_run(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        held: HeldStream = starting,
    ) -> AsyncIterator[ServerSentEvent]:
        """Start a run and stream it (``stream_mode``: values, updates, messages,
        messages-tuple, custom, events, debug; ``stream_subgraphs``; ``on_disconnect``)."""
        async for event in stream_of(held):
            yield event

    @router.post(
        f"{PREFIX}/runs/stream",
        tags=TAGS,
        openapi_extra=run_body,
        response_class=EventSourceResponse,
    )
    async def stream_stateless_run(
        project_id: Identifier, workspace_id: Identifier, held: HeldStream = starting
    ) -> AsyncIterator[ServerSentEvent]:
        async for event in stream_of(held):
            yield event

    @router.get(
        f"{PREFIX}/threads/{{thread_id}}/runs/{{run}}/stream",
        tags=TAGS,
        response_class=EventSourceResponse,
    )
    async def join_stream(
        project_id: Identifier,
        workspace_id: Identifier,
        thread_id: Identifier,
        run: Identifier,
        held: HeldStream = Depends(join_start),
    ) -> AsyncIterator[ServerSentEvent]:
        """Join a run's stream (``runs.join_stream``): with ``Last-Event-ID`` the events after
        that one (``-1``: all of the run's), without it those from now on, to the run's stop."""
        async for event in stream_of(held):
            yield event
