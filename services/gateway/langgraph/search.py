"""``threads.search``: a workspace's threads by ids, status, metadata and values, in the order
asked. Every search reads a bounded number of pages, never the whole history.

- By ``ids``: one read of the threads, then each found thread's latest turn, at once.
- By a status other than ``idle`` (busy, interrupted, error): the executions in it (the store
  lists them by status), each kept when it is its thread's latest turn, then filtered by
  ``metadata`` and ``values`` and ordered as asked: Agent Inbox's search (``interrupted`` with
  ``metadata.graph_id``) reads only the reviews waiting now.
- Otherwise: pages of the workspace's threads, newest first, filtered; ordered otherwise only
  when ``sort_by`` or ``sort_order`` asks for it (then every page up to the bound is read)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from services.gateway.conversations import Conversations
from services.gateway.intake import Intake
from services.gateway.langgraph.views import STATUSES_OF_THREAD, ThreadView
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.runs import thread_of
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

MAX_SEARCH = 100
SEARCH_PAGE = 100
SEARCH_PAGES = 20
"""A search reads at most this many pages of executions or threads: a bounded answer, never a
scan of history."""

SortBy = Literal["thread_id", "status", "created_at", "updated_at", "state_updated_at"]
SortOrder = Literal["asc", "desc"]


@dataclass(frozen=True)
class Order:
    """How found threads are listed (LangGraph's default: the most recently updated first)."""

    by: SortBy = "updated_at"
    order: SortOrder = "desc"

    def sort(self, views: list[ThreadView]) -> list[ThreadView]:
        return sorted(views, key=self._key, reverse=self.order == "desc")

    def _key(self, view: ThreadView) -> Any:
        if self.by == "thread_id":
            return view.record.thread_id
        if self.by == "status":
            return view.status
        if self.by == "created_at":
            return view.record.created_at
        return updated_at(view)


def updated_at(view: ThreadView) -> datetime:
    """When the thread last changed: its latest turn's last change (its creation, unrun)."""
    return view.execution.updated_at if view.execution else view.record.created_at


Views = Callable[[ThreadRecord, Execution | None], Awaitable[ThreadView]]


class ThreadFinder:
    def __init__(
        self, intake: Intake, store: Store, conversations: Conversations, view: Views
    ) -> None:
        self._intake = intake
        self._store = store
        self._conversations = conversations
        self._view = view

    async def by_ids(
        self,
        project_id: str,
        workspace_id: str,
        thread_ids: list[str],
        status: str | None,
        matches: Callable[[ThreadView], bool] | None,
    ) -> list[ThreadView]:
        """The workspace's threads among ``thread_ids``, in the order asked (with ``status``,
        those in it). An id of no thread here is left out, whether or not another workspace
        has one."""
        records = await self._store.threads.get_many(project_id, workspace_id, thread_ids)
        found = [
            records[t] for t in dict.fromkeys(thread_ids) if t in records and not records[t].deleted
        ]
        views = await self._views(found)
        return [
            v
            for v in views
            if (status is None or v.status == status) and (matches is None or matches(v))
        ]

    async def search(
        self,
        project_id: str,
        workspace_id: str,
        status: str | None,
        limit: int,
        offset: int,
        matches: Callable[[ThreadView], bool] | None = None,
        order: Order | None = None,
    ) -> list[ThreadView]:
        """Threads of the workspace (module docstring), ``limit`` from ``offset``."""
        limit = min(limit, MAX_SEARCH)
        if status is None or status == "idle":
            if order is None:
                return await self._listed(project_id, workspace_id, status, limit, offset, matches)
            every = await self._listed(
                project_id, workspace_id, status, SEARCH_PAGE * SEARCH_PAGES, 0, matches
            )
            return order.sort(every)[offset : offset + limit]
        found = await self._by_status(project_id, workspace_id, STATUSES_OF_THREAD[status])
        records = await self._store.threads.get_many(
            project_id, workspace_id, [thread for thread, _ in found]
        )
        live = {t: r for t, r in records.items() if not r.deleted}
        views = list(await asyncio.gather(*(self._view(live[t], e) for t, e in found if t in live)))
        if matches is not None:
            views = [v for v in views if matches(v)]
        return (order or Order()).sort(views)[offset : offset + limit]

    async def _views(self, records: list[ThreadRecord]) -> list[ThreadView]:
        latest = await asyncio.gather(*(self._conversations.latest(r) for r in records))
        return list(
            await asyncio.gather(*(self._view(r, e) for r, e in zip(records, latest, strict=True)))
        )

    async def _listed(
        self,
        project_id: str,
        workspace_id: str,
        status: str | None,
        limit: int,
        offset: int,
        matches: Callable[[ThreadView], bool] | None,
    ) -> list[ThreadView]:
        matched: list[ThreadView] = []
        skipped = 0
        for page in range(SEARCH_PAGES):
            records = await self._store.threads.list(
                project_id, workspace_id, limit=SEARCH_PAGE, offset=page * SEARCH_PAGE
            )
            for view in await self._views(records):
                if status is not None and view.status != status:
                    continue
                if matches is not None and not matches(view):
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
                matched.append(view)
                if len(matched) == limit:
                    return matched
            if len(records) < SEARCH_PAGE:
                break
        return matched

    async def _by_status(
        self, project_id: str, workspace_id: str, statuses: tuple[ExecutionStatus, ...]
    ) -> list[tuple[str, Execution]]:
        """Threads whose latest turn is in ``statuses``: the executions in them (up to the
        bound), each kept when no turn follows it but one queued behind it (an older turn
        tells nothing of the thread now)."""
        found: dict[str, Execution] = {}
        for status in statuses:
            cursor: str | None = None
            for _ in range(SEARCH_PAGES):
                page = await self._intake.list_executions(
                    project_id, workspace_id, status, SEARCH_PAGE, cursor
                )
                candidates = [(t, e) for e in page.items if (t := thread_of(e)) is not None]
                latest = await asyncio.gather(*(self._is_latest(e) for _, e in candidates))
                for (thread, execution), is_latest in zip(candidates, latest, strict=True):
                    if is_latest:
                        found.setdefault(thread, execution)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        return list(found.items())

    async def _is_latest(self, execution: Execution) -> bool:
        turn = execution.input.turn
        thread = thread_of(execution)
        if thread is None:
            return False
        record = ThreadRecord(
            project_id=execution.project_id, workspace_id=execution.workspace_id, thread_id=thread
        )
        following = await self._conversations.turn(record, (turn.turn if turn else 1) + 1)
        # A turn queued behind this one leaves it the one the thread shows (``view``).
        return following is None or (
            following.status is ExecutionStatus.PENDING and following.epoch == 0
        )
