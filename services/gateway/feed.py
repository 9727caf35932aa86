"""The gateway's side of push: ``execution.activity`` fanned out to the open execution streams.

Every gateway process hears the whole topic (a listener, no consumer group: shared/bus.py,
``ListenerHost``) and hands each message to the streams watching its execution. A message for an
execution nobody here watches is dropped before it is decoded, by its key, so a gateway's cost
grows with what its clients watch, not with the traffic.

A stream starts watching *before* it reads the store, so nothing falls between the read and the
first message heard: whatever was published before the watch began was stored before it was
published, and the read sees it; whatever comes after is heard. Duplicates of what the read
returned are dropped by the stream's cursor.

A watcher that falls too far behind (its client reads slower than the execution changes) is
marked overflowed rather than buffered without bound; its stream closes and the client
reconnects with ``Last-Event-ID``, which reads the store once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Protocol

import structlog

from shared.activity import CHANGED_IN_HEADER, ExecutionActivity, decode_activity
from shared.bus import Delivery
from shared.events import EventDecodeError
from shared.waiting import wait_event

log = structlog.get_logger(__name__)

WATCH_CAPACITY = 1_000
"""Messages one stream may have waiting before it is closed as too slow (each is one batch of
progress or one change; a live execution makes a few a second)."""


class Watch:
    """One stream's inbox, in arrival order: the activity of one execution of one project, or
    (``workspace_id``) the changes of every execution of one workspace."""

    def __init__(
        self,
        project_id: str,
        capacity: int,
        *,
        execution_id: str | None = None,
        workspace_id: str | None = None,
    ) -> None:
        self.project_id = project_id
        self.execution_id = execution_id
        self.workspace_id = workspace_id
        self.overflowed = False
        self.ended: str | None = None
        """Why the stream must close though nothing went wrong with it (its key was revoked)."""
        self._capacity = capacity
        self._inbox: deque[ExecutionActivity] = deque()
        self._arrived = asyncio.Event()

    def wants(self, activity: ExecutionActivity) -> bool:
        # Execution ids are unique within a project only: another tenant's execution of the
        # same id must not reach this stream.
        if activity.project_id != self.project_id:
            return False
        if self.workspace_id is None:
            return activity.execution_id == self.execution_id
        change = activity.change
        return change is not None and change.workspace_id == self.workspace_id

    def offer(self, activity: ExecutionActivity) -> None:
        if not self.wants(activity):
            return
        if len(self._inbox) >= self._capacity:
            self.overflowed = True
        else:
            self._inbox.append(activity)
        self._arrived.set()

    def end(self, why: str) -> None:
        self.ended = why
        self._arrived.set()

    async def next(self, seconds: float) -> list[ExecutionActivity]:
        """What arrived since the last call, waiting up to ``seconds`` for something (an empty
        list when nothing came, or when the watch was ended)."""
        if not self._inbox and not self.overflowed and self.ended is None:
            await wait_event(self._arrived, seconds)
        self._arrived.clear()
        taken = list(self._inbox)
        self._inbox.clear()
        return taken


class Demand(Protocol):
    """A listener that fetches only while it is wanted (shared/kafka_listener.py)."""

    async def want(self) -> None: ...

    def release(self) -> None: ...


class ExecutionFeed:
    """The watches of one gateway process; ``heard`` is its bus listener. With a ``demand``, the
    listener fetches only while some stream is open here (``listening``)."""

    def __init__(self, capacity: int = WATCH_CAPACITY, demand: Demand | None = None) -> None:
        self._capacity = capacity
        self.demand = demand
        self._by_execution: dict[str, set[Watch]] = {}
        self._by_project: dict[str, set[Watch]] = {}
        """Workspace watches, by project: what a change's header names."""

    @property
    def watching(self) -> int:
        return sum(len(w) for w in self._by_execution.values()) + sum(
            len(w) for w in self._by_project.values()
        )

    def watch(self, project_id: str, execution_id: str) -> AbstractContextManager[Watch]:
        """Watch one execution's activity (its changes and its progress)."""
        watch = Watch(project_id, self._capacity, execution_id=execution_id)
        return _registered(self._by_execution, execution_id, watch)

    def watch_workspace(self, project_id: str, workspace_id: str) -> AbstractContextManager[Watch]:
        """Watch the changes of every execution of a workspace (no progress)."""
        watch = Watch(project_id, self._capacity, workspace_id=workspace_id)
        return _registered(self._by_project, project_id, watch)

    @asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """While a stream is open: from the entry on, what is published is heard (enter it
        after registering the watch and before reading the store)."""
        demand = self.demand
        if demand is None:
            yield
            return
        await demand.want()
        try:
            yield
        finally:
            demand.release()

    def heard(self, delivery: Delivery) -> None:
        # Decided on the key and a header, before decoding: most messages concern nobody here.
        watches = self._by_execution.get(delivery.key or "", _NONE)
        changed_in = _header(delivery, CHANGED_IN_HEADER)
        workspaces = self._by_project.get(changed_in, _NONE) if changed_in else _NONE
        if not watches and not workspaces:
            return
        try:
            activity = decode_activity(delivery.body)
        except EventDecodeError as exc:
            log.warning("activity.undecodable", offset=delivery.offset, error=str(exc))
            return
        if activity.execution_id != delivery.key:
            log.warning("activity.misrouted", key=delivery.key, execution=activity.execution_id)
            return
        for watch in [*watches, *workspaces]:
            watch.offer(activity)


_NONE: frozenset[Watch] = frozenset()


@contextmanager
def _registered(index: dict[str, set[Watch]], name: str, watch: Watch) -> Iterator[Watch]:
    index.setdefault(name, set()).add(watch)
    try:
        yield watch
    finally:
        watches = index.get(name)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del index[name]


def _header(delivery: Delivery, name: str) -> str | None:
    value = delivery.headers.get(name)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None
