"""``GET .../executions/{id}/stream``: an execution as server-sent events.

Two sources, each with its own cursor, both durable so a reconnecting client misses nothing:

- the execution's audit trail (status changes, rejected decisions), which only ever grows;
  when the newest status is ``suspended`` the ``interrupt`` event carries the review request;
- the progress log the sandbox writes while the agent runs (node updates, model tokens).

Every event's ``id`` is both cursors (``<audit entries seen>/<last progress key>``); a client
sends the last one back as ``Last-Event-ID`` (browsers do so on their own) and gets only what
came after it.

Pushed, not polled: a stream reads the store once, when it opens (or reopens with
``Last-Event-ID``), and from then on is fed by the ``execution.activity`` messages the gateway
hears (services/gateway/feed.py): each change carries the whole audit trail and the execution's
view, each progress batch its entries. An idle stream costs no query and no wake-up. The store is
read again only when a change's view was too big to carry (shared/activity.py).

A stream is bounded three ways: it closes within ``key_check_seconds`` of its key being revoked
(``KeyGuard``: one timer and one key read per interval per process, however many streams the key
has open, so an idle stream is never woken for it); one key may hold at most ``max_per_key``
streams open on one gateway process (429 beyond); and a stream lives at most ``max_seconds``,
after which the client reconnects with ``Last-Event-ID`` (browsers do on their own) and
continues exactly where it stopped. ``StreamBounds`` holds the three for the whole process: the
LangGraph API's waits, joins and streams (services/gateway/langgraph/) are held by the same cap,
re-check and lifetime.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, aclosing, contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from services.gateway.auth import ANY_ROLE, KeyRechecks, access
from services.gateway.feed import ExecutionFeed, Watch
from services.gateway.intake import Intake
from services.gateway.openapi import PROBLEM_RESPONSES
from services.gateway.problems import Problem
from services.gateway.schemas import ExecutionView
from services.gateway.stream_events import (
    Snapshot,
    StreamCursor,
    Until,
    audit_events,
    finished,
    progress_events,
)
from shared.activity import ExecutionActivity
from shared.domain.execution import Execution
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.progress import PROGRESS_PAGE, ProgressEntry

RETRY_MS = 2_000
DEFAULT_KEY_CHECK_SECONDS = 5.0
DEFAULT_MAX_PER_KEY = 20
DEFAULT_MAX_SECONDS = 900.0
STREAM_CAP_RETRY_AFTER_SECONDS = 5

log = structlog.get_logger(__name__)


KEY_REVOKED = "the API key is no longer valid"
"""Why a held request's watch ended: its key was revoked (or deleted) since it authenticated."""
KEY_UNCHECKED = "the API key could not be checked again: reconnect"
"""Why a held request's watch ended: the key's re-check failed (the reconnect is checked)."""


class StreamEnded(Exception):
    """The client has every event of a finished execution."""


@dataclass(frozen=True)
class StreamLimits:
    key_check_seconds: float = DEFAULT_KEY_CHECK_SECONDS
    """How often a stream's key is read again (a revoked key's streams close)."""
    max_per_key: int = DEFAULT_MAX_PER_KEY
    """Streams one key may hold open on one gateway process."""
    max_seconds: float = DEFAULT_MAX_SECONDS
    """How long a stream lives before the client must reconnect (with Last-Event-ID)."""
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)


class OpenStreams:
    """How many streams each key holds open in this process, refusing one past the cap. No lock:
    ``open`` and ``close`` never await, so on one event loop they cannot interleave."""

    def __init__(self, max_per_key: int) -> None:
        if max_per_key < 1:
            raise ValueError("max_per_key must be >= 1")
        self.max_per_key = max_per_key
        self._open: dict[str, int] = {}

    def open(self, key_id: str) -> bool:
        held = self._open.get(key_id, 0)
        if held >= self.max_per_key:
            return False
        self._open[key_id] = held + 1
        return True

    def close(self, key_id: str) -> None:
        held = self._open.get(key_id, 0) - 1
        if held > 0:
            self._open[key_id] = held
        else:
            self._open.pop(key_id, None)


class KeyGuard:
    """Re-checks the keys of this process's open streams: one timer and at most one read per key
    per ``interval``, however many streams the key holds, and an idle stream is never woken for
    it. A revoked key's streams are ended at once; so are they when the key cannot be read (the
    client's reconnect is checked again)."""

    def __init__(self, rechecks: KeyRechecks) -> None:
        self._rechecks = rechecks
        self._watches: dict[str, set[Watch]] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}

    @property
    def timers(self) -> int:
        return len(self._timers)

    @contextmanager
    def guarding(self, key: ApiKey, watch: Watch) -> Iterator[None]:
        watches = self._watches.setdefault(key.key_id, set())
        watches.add(watch)
        if key.key_id not in self._timers:
            self._timers[key.key_id] = asyncio.create_task(
                self._recheck(key), name="recheck a stream key"
            )
        try:
            yield
        finally:
            watches.discard(watch)
            if not watches:
                del self._watches[key.key_id]
                timer = self._timers.pop(key.key_id, None)
                if timer is not None:
                    timer.cancel()

    async def _recheck(self, key: ApiKey) -> None:
        while True:
            await asyncio.sleep(self._rechecks.interval)
            try:
                valid = await self._rechecks.still_valid(key)
            except Exception as exc:
                log.warning("stream.key_recheck_failed", key_id=key.key_id, error=repr(exc))
                why = KEY_UNCHECKED
            else:
                if valid:
                    continue
                why = KEY_REVOKED
            for watch in list(self._watches.get(key.key_id, ())):
                watch.end(why)
            # The key's last stream closing cancels this timer; until then, nothing more to do.
            return


class StreamBounds:
    """The three bounds of every request this gateway process holds open: execution streams and
    workspace changes (here), the LangGraph API's waits, joins and streams
    (services/gateway/langgraph/). One cap per key across all of them, one re-check timer per
    key, one lifetime: built once per process (services/gateway/app.py) and handed to each."""

    def __init__(self, keys: ApiKeys, limits: StreamLimits | None = None) -> None:
        self.limits = limits or StreamLimits()
        self._open = OpenStreams(self.limits.max_per_key)
        self._guard = KeyGuard(
            KeyRechecks(keys, interval=self.limits.key_check_seconds, clock=self.limits.clock)
        )

    @contextmanager
    def slot(self, key: ApiKey) -> Iterator[None]:
        """One of the key's held requests on this process; 429 past ``max_per_key``."""
        if not self._open.open(key.key_id):
            raise Problem(
                429,
                "too-many-streams",
                "Too many open streams",
                f"this key holds {self.limits.max_per_key} streams or waits open on this gateway"
                " (execution streams, changes, LangGraph waits, joins and streams), the most it"
                " may; close one or retry later",
                headers={"Retry-After": str(STREAM_CAP_RETRY_AFTER_SECONDS)},
            )
        try:
            yield
        finally:
            self._open.close(key.key_id)

    def guarding(self, key: ApiKey, watch: Watch) -> AbstractContextManager[None]:
        """``watch`` ended (``KEY_REVOKED``, ``KEY_UNCHECKED``) once ``key`` no longer holds."""
        return self._guard.guarding(key, watch)

    def lifetime(self, seconds: float) -> float:
        """At most ``seconds``, and never past the streams' ``max_seconds``."""
        return min(seconds, self.limits.max_seconds)


def install_stream(
    app: FastAPI, intake: Intake, keys: ApiKeys, feed: ExecutionFeed, bounds: StreamBounds
) -> None:
    async def ended(_: Request, __: Exception) -> Response:
        return Response(status_code=204)

    app.add_exception_handler(StreamEnded, ended)
    app.include_router(build_stream_router(intake, keys, feed, bounds))


@dataclass(frozen=True)
class StreamChecks:
    """The streams' dependencies. They run before the 200 of a stream is sent, so a missing
    execution, a bad ``Last-Event-ID`` or a key over its cap is still a problem document; those
    with ``yield`` end once the response is over, however the stream ended."""

    reader: Any
    """``Depends`` on a key with any role."""
    watching: Callable[..., AsyncIterator[Watch]]
    """The execution's activity, watched from before it is read (services/gateway/feed.py)."""
    watched: Callable[..., Awaitable[Execution]]
    resume_point: Callable[..., StreamCursor]
    workspace_watching: Callable[..., AsyncIterator[Watch]]
    slot: Callable[..., AsyncIterator[None]]
    """One of the key's streams on this process, refused (429) past ``max_per_key``."""


def stream_checks(
    intake: Intake, keys: ApiKeys, feed: ExecutionFeed, bounds: StreamBounds
) -> StreamChecks:
    reader = Depends(access(keys, "reading", ANY_ROLE))

    async def watching(
        project_id: Identifier,
        execution_id: Identifier,
        key: ApiKey = reader,
    ) -> AsyncIterator[Watch]:
        with feed.watch(project_id, execution_id) as watch, bounds.guarding(key, watch):
            async with feed.listening():
                yield watch

    async def watched(
        project_id: Identifier,
        execution_id: Identifier,
        workspace_id: Annotated[Identifier, Query()],
        _: Watch = Depends(watching),
        key: ApiKey = reader,
    ) -> Execution:
        return await intake.get(project_id, workspace_id, execution_id)

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

    async def workspace_watching(
        project_id: Identifier,
        workspace_id: Annotated[Identifier, Query()],
        key: ApiKey = reader,
    ) -> AsyncIterator[Watch]:
        with (
            feed.watch_workspace(project_id, workspace_id) as watch,
            bounds.guarding(key, watch),
        ):
            async with feed.listening():
                yield watch

    async def slot(key: ApiKey = reader) -> AsyncIterator[None]:
        with bounds.slot(key):
            yield

    return StreamChecks(reader, watching, watched, resume_point, workspace_watching, slot)


def build_stream_router(
    intake: Intake, keys: ApiKeys, feed: ExecutionFeed, bounds: StreamBounds
) -> APIRouter:
    router = APIRouter(responses=PROBLEM_RESPONSES)
    checks = stream_checks(intake, keys, feed, bounds)
    reader = checks.reader
    limits = bounds.limits

    @router.get(
        "/api/v1/projects/{project_id}/executions/{execution_id}/stream",
        response_class=EventSourceResponse,
        tags=["executions"],
        responses={204: {"description": "The client has every event of a finished execution"}},
    )
    async def stream_execution(
        execution: Execution = Depends(checks.watched),
        watch: Watch = Depends(checks.watching),
        cursor: StreamCursor = Depends(checks.resume_point),
        _: None = Depends(checks.slot),
        key: ApiKey = reader,
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
        continue after an event. A stream closes after a while (or when its key is revoked);
        reconnect with ``Last-Event-ID`` to continue where it stopped."""
        async for event in execution_events(intake, execution, watch, cursor, until, limits):
            yield event

    @router.get(
        "/api/v1/projects/{project_id}/changes",
        response_class=EventSourceResponse,
        tags=["executions"],
    )
    async def stream_changes(
        watch: Watch = Depends(checks.workspace_watching),
        _: None = Depends(checks.slot),
        key: ApiKey = reader,
    ) -> AsyncIterator[ServerSentEvent]:
        """Every change of every execution of the workspace, as it happens: a ``change`` event
        whose data is the execution as ``GET .../executions/{id}`` shows it. Nothing is
        replayed: once this stream is open, read what you show (the pending reviews, say:
        ``GET .../executions?status=suspended``) and apply the changes that follow; after a
        reconnect, read it again. The review page follows its list this way."""
        async for event in workspace_changes(intake, watch, limits):
            yield event

    return router


async def execution_events(
    intake: Intake,
    execution: Execution,
    watch: Watch,
    cursor: StreamCursor,
    until: Until,
    limits: StreamLimits,
) -> AsyncIterator[ServerSentEvent]:
    """One execution's stream: what happened before it opened (one read of the store), then
    what the feed pushes, until the execution ends (or waits, with ``until=suspended``), the
    stream's lifetime is over, its key is revoked or it fell behind."""
    opened = limits.clock()
    yield ServerSentEvent(comment="interlock execution stream", retry=RETRY_MS)
    # The one read of the store: what happened before this stream (or its reconnect).
    snapshot = Snapshot.of(execution)
    sent, cursor = progress_events(await stored_progress(intake, execution, cursor), cursor)
    for event in sent:
        yield event
    sent, cursor = audit_events(snapshot, cursor)
    for event in sent:
        yield event
    if finished(snapshot, sent, until):
        return
    pushed = Pushed(watch, limits, opened, reconnect="reconnect with Last-Event-ID")
    async with aclosing(pushed.batches()) as batches:
        async for arrived in batches:
            for activity in arrived:
                if activity.change is None:
                    entries = [item.entry() for item in activity.progress or []]
                    sent, cursor = progress_events(entries, cursor)
                else:
                    snapshot = Snapshot.of_change(activity.execution_id, activity.change) or (
                        Snapshot.of(
                            await intake.get(
                                execution.project_id, execution.workspace_id, execution.execution_id
                            )
                        )
                    )
                    sent, cursor = audit_events(snapshot, cursor)
                for event in sent:
                    yield event
                if finished(snapshot, sent, until):
                    return
    yield pushed.closing


async def workspace_changes(
    intake: Intake, watch: Watch, limits: StreamLimits
) -> AsyncIterator[ServerSentEvent]:
    """A workspace's changes as the feed pushes them, until the stream's lifetime is over, its
    key is revoked or it fell behind."""
    opened = limits.clock()
    yield ServerSentEvent(comment="interlock workspace changes", retry=RETRY_MS)
    pushed = Pushed(watch, limits, opened, reconnect="reconnect and read again")
    async with aclosing(pushed.batches()) as batches:
        async for arrived in batches:
            for activity in arrived:
                change = activity.change
                if change is None:
                    continue
                view = change.view
                if view is None:  # too big to carry: read this one
                    stored = await intake.get(
                        activity.project_id, change.workspace_id, activity.execution_id
                    )
                    view = ExecutionView.of(stored).model_dump(mode="json")
                yield ServerSentEvent(event="change", data=view)
    yield pushed.closing


@dataclass
class Pushed:
    """What the feed pushes to one stream, batch by batch, until the stream's lifetime is over,
    its watch ended (the key was revoked, the gateway stops) or it fell behind; then
    ``closing`` is the comment that tells the client why and how to go on (``reconnect``)."""

    watch: Watch
    limits: StreamLimits
    opened: float
    reconnect: str
    closing: ServerSentEvent = field(init=False)

    async def batches(self) -> AsyncGenerator[list[ExecutionActivity], None]:
        while True:
            left = self.limits.max_seconds - (self.limits.clock() - self.opened)
            if left <= 0:
                # Checked after a batch is sent whole: every event before the close carries
                # its id, so the reconnect continues exactly after the last one.
                self.closing = ServerSentEvent(comment=f"stream lifetime over: {self.reconnect}")
                return
            arrived = await self.watch.next(left)
            if self.watch.ended is not None:
                self.closing = ServerSentEvent(comment=self.watch.ended)
                return
            if self.watch.overflowed:
                self.closing = ServerSentEvent(comment=f"fell behind: {self.reconnect}")
                return
            yield arrived


async def stored_progress(
    intake: Intake, execution: Execution, cursor: StreamCursor
) -> list[ProgressEntry]:
    """Every stored entry after the cursor (the log answers in pages)."""
    entries: list[ProgressEntry] = []
    after = cursor.progress
    while True:
        page = await intake.progress_after(execution, after)
        entries.extend(page)
        if len(page) < PROGRESS_PAGE:
            return entries
        after = page[-1].key
