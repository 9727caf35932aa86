"""Markers of the executions that wait: what the sweeps and the pending-reviews list read instead
of the heads, which FerretDB would scan whatever the filter (every execution ever stored).

Two kinds, each a document per waiting execution, so a query over them is bounded by what waits
now, never by the history:

- ``suspended_executions``: one per suspension (``_id`` = ``<execution>|<epoch>.<suspension>``),
  with the execution's scope and creation time (the pending-reviews list) and the suspension's
  next deadline (the deadline sweep);
- ``undelivered_executions``: one per request the gateway could not deliver
  (``_id`` = ``<execution>|<time>``), the undelivered-request sweep's.

There is no transaction, so a marker is a hint the reader checks against the execution (read by
``_id``), and the writes are ordered so that a crash anywhere leaves a marker too many, never
one too few, and a deadline earlier than the execution's, never later:

- a version that starts waiting adds its marker before its compare-and-set;
- a version that stops waiting removes it after its head write;
- a version that moves a suspension's deadline on (a deadline fired) updates it after its head
  write: until then the marker holds the earlier deadline, which is due, so the sweep finds it
  and repairs it from the execution;
- a marker its execution no longer matches (its writer lost the compare-and-set, or died before
  removing it) is never acted on, and is removed once ``GRACE`` old (younger, it may belong to a
  version still being written). The key in the ``_id`` means removing a stale marker never takes
  a newer one: a new suspension or a new failed delivery has another ``_id``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.domain.execution import Execution, ExecutionStatus, next_deadline
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.ports import Page

Document = dict[str, Any]
Reader = Callable[[str, str, int | None], Awaitable[Execution | None]]
"""Reads an execution: (project, execution, min_epoch), as ``ExecutionStore.get``."""

GRACE = timedelta(seconds=60)
"""How old a marker its execution does not match must be before it is removed."""
BACKFILLED = "waiting-markers-1"


def time_key(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def suspension_key(execution: Execution) -> str | None:
    """Which suspension a suspended execution waits in (its epoch, and the suspension's id)."""
    if execution.status is not ExecutionStatus.SUSPENDED:
        return None
    suspension_id = execution.suspension.suspension_id if execution.suspension else 0
    return f"{execution.epoch:012d}.{suspension_id:012d}"


def deadline_key(execution: Execution) -> str | None:
    """The next unfired deadline of a suspended execution, as sortable UTC text."""
    at = next_deadline(execution)
    return None if at is None else time_key(at)


def undelivered_key(execution: Execution) -> str | None:
    if execution.status is not ExecutionStatus.PENDING or execution.epoch != 0:
        return None
    since = execution.undelivered_since
    return None if since is None else time_key(since)


def _marker_id(execution_id: str, key: str) -> str:
    return f"{execution_id}|{key}"


class WaitingMarkers:
    def __init__(self, database: AsyncDatabase[Document], read: Reader) -> None:
        self._suspended = database["suspended_executions"]
        self._undelivered = database["undelivered_executions"]
        self._migrations = database["store_migrations"]
        self._read = read

    async def ensure_indexes(self, waiting_heads: Callable[[], Any]) -> None:
        await self._suspended.create_index(
            [("deadline_key", ASCENDING), ("_id", ASCENDING)], name="by_deadline"
        )
        await self._suspended.create_index(
            [
                ("project_id", ASCENDING),
                ("workspace_id", ASCENDING),
                ("created_key", ASCENDING),
                ("execution_id", ASCENDING),
            ],
            name="by_scope_created",
        )
        await self._undelivered.create_index(
            [("key", ASCENDING), ("_id", ASCENDING)], name="by_key"
        )
        await self._backfill(waiting_heads)

    async def _backfill(self, waiting_heads: Callable[[], Any]) -> None:
        """Once per database: markers for the executions that were waiting before markers
        existed (the one scan of the heads the store makes; a second replica doing it at the
        same time writes the same markers again)."""
        if await self._migrations.find_one({"_id": BACKFILLED}) is not None:
            return
        async for execution in waiting_heads():
            await self.before_write(None, execution)
        await _upsert(self._migrations, BACKFILLED, {"at": datetime.now(UTC)})

    # --- around a version's write ------------------------------------------------------------

    async def before_write(self, before: Execution | None, after: Execution) -> None:
        """Before the compare-and-set of ``after``: the markers of what it starts waiting on."""
        suspension = suspension_key(after)
        if suspension is not None and (before is None or suspension_key(before) != suspension):
            await self._mark_suspended(after, suspension)
        undelivered = undelivered_key(after)
        if undelivered is not None and (before is None or undelivered_key(before) != undelivered):
            await _upsert(
                self._undelivered,
                _marker_id(after.execution_id, undelivered),
                {**_scope(after), "key": undelivered, "written": datetime.now(UTC)},
            )

    async def after_write(self, before: Execution, after: Execution) -> None:
        """After the head write of ``after``: the markers of what it stopped waiting on go, and
        a suspension whose deadline moved on gets the new one."""
        suspension = suspension_key(before)
        if suspension is not None:
            if suspension_key(after) != suspension:
                await self._suspended.delete_one(
                    {"_id": _marker_id(before.execution_id, suspension)}
                )
            elif deadline_key(after) != deadline_key(before):
                await self._mark_suspended(after, suspension)
        undelivered = undelivered_key(before)
        if undelivered is not None and undelivered_key(after) != undelivered:
            await self._undelivered.delete_one(
                {"_id": _marker_id(before.execution_id, undelivered)}
            )

    async def _mark_suspended(self, execution: Execution, suspension: str) -> None:
        await _upsert(
            self._suspended,
            _marker_id(execution.execution_id, suspension),
            {
                **_scope(execution),
                "created_key": execution.created_at.isoformat(),
                "key": suspension,
                "deadline_key": deadline_key(execution),
                "written": datetime.now(UTC),
            },
        )

    # --- reads -------------------------------------------------------------------------------

    async def due_deadlines(self, now: datetime, limit: int) -> list[Execution]:
        found = (
            self._suspended.find({"deadline_key": {"$lte": time_key(now)}})
            .sort([("deadline_key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit)
        )
        due = []
        for marker in [m async for m in found]:
            execution = await self._read(marker["project_id"], marker["execution_id"], None)
            if execution is None or suspension_key(execution) != marker["key"]:
                await _remove_if_stale(self._suspended, marker)
            elif deadline_key(execution) == marker["deadline_key"]:
                due.append(execution)
            else:
                # Its writer died between its head write and this update, or is in between now:
                # the execution says what is next.
                await self._mark_suspended(execution, marker["key"])
        return due

    async def undelivered_before(self, cutoff: datetime, limit: int) -> list[Execution]:
        found = (
            self._undelivered.find({"key": {"$lte": time_key(cutoff)}})
            .sort([("key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit)
        )
        due = []
        for marker in [m async for m in found]:
            execution = await self._read(marker["project_id"], marker["execution_id"], None)
            if execution is not None and undelivered_key(execution) == marker["key"]:
                due.append(execution)
            else:
                await _remove_if_stale(self._undelivered, marker)
        return due

    async def pending_reviews(
        self, project_id: str, workspace_id: str, limit: int, cursor: str | None
    ) -> Page:
        """A scope's suspended executions, oldest first, each checked against its head."""
        query: Document = {"project_id": project_id, "workspace_id": workspace_id}
        if cursor:
            after_key, after_id = decode_cursor(cursor)
            query["$or"] = [
                {"created_key": {"$gt": after_key}},
                {"created_key": after_key, "execution_id": {"$gt": after_id}},
            ]
        found = self._suspended.find(query).sort(
            [("created_key", ASCENDING), ("execution_id", ASCENDING), ("_id", ASCENDING)]
        )
        items: list[Execution] = []
        async for marker in found:
            # The head alone: one that trails leaves a review out of this page for the moment
            # of a write, as a list read a moment earlier would have.
            execution = await self._read(project_id, marker["execution_id"], 0)
            if execution is not None and suspension_key(execution) == marker["key"]:
                items.append(execution)
                if len(items) > limit:
                    break
            else:
                await _remove_if_stale(self._suspended, marker)
        page, more = items[:limit], len(items) > limit
        next_cursor = None
        if more and page:
            last = page[-1]
            next_cursor = encode_cursor(last.created_at.isoformat(), last.execution_id)
        return Page(page, next_cursor)


def _scope(execution: Execution) -> Document:
    return {
        "execution_id": execution.execution_id,
        "project_id": execution.project_id,
        "workspace_id": execution.workspace_id,
    }


async def _upsert(markers: AsyncCollection[Document], marker_id: str, document: Document) -> None:
    """Replace or insert. Two upserts of a new ``_id`` at once (a redelivered write, two replicas
    marking at start-up) can both try the insert on MongoDB and FerretDB, and one then fails with
    a duplicate key: the document exists by then, so it is replaced."""
    try:
        await markers.replace_one({"_id": marker_id}, document, upsert=True)
    except DuplicateKeyError:
        await markers.replace_one({"_id": marker_id}, document, upsert=True)


async def _remove_if_stale(markers: AsyncCollection[Document], marker: Document) -> None:
    written = marker.get("written")
    if written is None or written.replace(tzinfo=UTC) <= datetime.now(UTC) - GRACE:
        await markers.delete_one({"_id": marker["_id"]})
