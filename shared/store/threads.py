"""Threads of the LangGraph Agent Server compatible API: a durable conversation, by id.

A thread is a conversation of runs ("turns"), each an execution whose id is derived from the
thread's, so the record only has to exist, be listed, and hint how many turns it has started
(``turns``). Thread ids are unique per workspace, not globally (callers choose them), so every
adapter keys a thread by (project, workspace, thread) and creating one is an insert under
that key: the one atomic write every server has, so of concurrent creates of one id exactly one
creates. Every read names the workspace: a thread of another workspace is never returned, and
its id is as free here as one never used (nothing tells that it exists). ``metadata`` is the
caller's data: adapters keep it as JSON text, never as document keys.

``turns`` is kept apart from the rest of the record (its own field, column or table), so a
metadata update and a turn note never write the same value: neither can undo the other (except
on FerretDB, which writes back a whole document per update: shared/store/mongo/threads.py). A
deleted thread takes its turns with it, so one created again under its id starts at 0.

A thread may have a time to live (LangGraph's thread ``ttl``): ``ttl_minutes``, and
``expires_at``, when the retention sweep may delete it, which every new turn moves on (``note_turn``
takes it in the same write as the turn) and ``set_ttl`` sets. Both are kept beside the record's
text, like ``turns``, so a metadata update never takes them back; ``expired`` finds the threads
past it, in every project and workspace, through an index. Records written before retention have
neither field: kept until deleted.

On a tombstone, ``expires_at`` is when its erasure is due. Deleting a thread is two steps in two
places: the tombstone here, then the caller erasing the thread's turns (services/orchestrator/
thread_erasure.py). So that a process dying between the two leaves nothing unerased,
``mark_deleted`` makes the erasure due at once (``expires_at`` = the deletion time, in the mark's
one write), ``expired`` returns such tombstones beside the live threads past their expiry, and
``erasure_done`` clears it once the turns are erased. Nothing else moves a tombstone's expiry:
neither ``set_ttl`` nor a note, nor marking it again. Tombstones marked before this rule have
no expiry: never found by ``expired``.

The previous release keyed threads by (project, thread). Each adapter adopts such records when
it creates its schema (``ensure_indexes``, at every start-up): a record is read under the
workspace it was created in, as before, and nowhere else.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from shared.events import utc_now


class ThreadRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    project_id: str
    workspace_id: str
    thread_id: str
    created_at: AwareDatetime = Field(default_factory=utc_now)
    metadata: dict[str, Any] = Field(default_factory=dict)
    turns: int = Field(default=0, ge=0)
    """How many turns the thread is known to have started: a hint, which may trail (never lead)
    the executions, the truth. Readers probe the turns after it."""
    deleted_at: AwareDatetime | None = None
    """Set when the thread was deleted: the record is then a tombstone, with no metadata, kept so
    its id is never a thread again (its turns' execution ids derive from it, and a new thread
    under it would meet their records while they are erased)."""

    ttl_minutes: float | None = None
    """The thread's time to live, in minutes (LangGraph's ``ttl: {"strategy": "delete", "ttl":
    minutes}``): each new turn moves ``expires_at`` to that long after it. None: the thread is
    kept until it is deleted. ``mark_deleted`` clears it: a tombstone has no ttl."""
    expires_at: AwareDatetime | None = None
    """When the retention sweep may delete the thread: ``ttl_minutes`` after its last turn
    started (or after it was created, or given its ttl); None: never. On a tombstone, when its
    erasure is due: its deletion time, cleared (None) once erased (``erasure_done``). Kept to
    the millisecond (``expiry_time``): what every adapter stores (a BSON date holds no more),
    so a record reads back as it was given."""

    @field_validator("expires_at")
    @classmethod
    def _to_the_millisecond(cls, value: datetime | None) -> datetime | None:
        return None if value is None else expiry_time(value)

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None


class ThreadStore(Protocol):
    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        """Insert unless the workspace has a thread with this id; return the stored thread (the
        first one, whatever this one's metadata, with its turns as noted) and whether it was
        created now. Another workspace's thread of the same id is another thread. The record's
        ``turns`` (normally 0) is the new thread's first hint."""
        ...

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        """The workspace's thread of this id (None for one of another workspace)."""
        ...

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        """The workspace's threads among ``thread_ids``, by id, in one query; missing ids (and
        other workspaces' threads) are left out."""
        ...

    async def note_turn(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        turn: int,
        *,
        expires_at: datetime | None = None,
    ) -> None:
        """Record that the thread has started turn ``turn``: the thread's ``turns`` becomes at
        least ``turn``. A hint: readers probe the turns after it (the executions are the truth),
        so under concurrent writers it may trail, never lead; a thread that does not exist is
        left alone.

        With ``expires_at`` (the new turn restarting the thread's ttl), the same single write also
        moves the thread's ``expires_at`` to it, unless it is later already: a late note (of an
        earlier turn, or from a replica whose clock trails) never brings an expiry forward;
        ``set_ttl`` is what shortens one. This is every turn's path, so one store command
        either way. A tombstone is then left as it is, expiry (its erasure due) and hint (which
        may trail, as hints may): one write cannot note one and not the other on every
        server."""
        ...

    async def set_ttl(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        ttl_minutes: float | None,
        expires_at: datetime | None,
    ) -> ThreadRecord | None:
        """Set the thread's ``ttl_minutes`` and ``expires_at`` (None and None: kept until
        deleted) and return the updated thread; None when the workspace has no such thread. A
        tombstone is returned unchanged: it is never given a ttl, and its expiry (its erasure
        due) stays. ``turns``, ``created_at`` and
        the metadata are kept; of concurrent calls the last one wins."""
        ...

    async def expired(self, now: datetime, *, limit: int) -> list[ThreadRecord]:
        """Threads of every project and workspace whose ``expires_at`` is ``now`` or earlier,
        soonest first, ``limit`` of them at most: one query, through an index on the expiry.
        Live threads past their ttl and tombstones whose erasure is due come mixed, in the one
        order of their ``expires_at``; the caller tells them apart by ``deleted``. Threads
        without an expiry (a tombstone once erased among them) are never there."""
        ...

    async def set_metadata(
        self, project_id: str, workspace_id: str, thread_id: str, metadata: dict[str, Any]
    ) -> ThreadRecord | None:
        """Replace the thread's metadata with ``metadata`` (the caller merges) and return the
        updated thread; None when the workspace has no such thread. Of concurrent updates the
        last writer wins, so of two callers merging at once one's keys may be dropped: there is
        no compare-and-set, which FerretDB 1.x could not make atomic anyway (see
        shared/store/mongo/executions.py). ``turns``, ``created_at`` and the ttl are kept."""
        ...

    async def mark_deleted(
        self, project_id: str, workspace_id: str, thread_id: str, at: datetime
    ) -> ThreadRecord | None:
        """Make the workspace's thread a tombstone, in one write: its metadata emptied,
        ``deleted_at`` set to ``at``, its ``expires_at`` too (its erasure is due now, so
        ``expired`` finds it until ``erasure_done``) and its ``ttl_minutes`` cleared; return the
        tombstone. A thread marked already is returned as it is: its first ``deleted_at``, and
        its expiry as it is now (cleared, if its erasure is done: never due again). None when
        the workspace has no such thread. ``at`` needs a time zone. ``get``, ``get_many`` and
        ``create`` return tombstones like any thread (the caller refuses them); ``list`` leaves
        them out."""
        ...

    async def erasure_done(self, project_id: str, workspace_id: str, thread_id: str) -> None:
        """Say the workspace's tombstone of this id is erased: clear its ``expires_at``, so
        ``expired`` no longer returns it. A live thread (its expiry is its ttl's), or no thread,
        is left alone. One write; calling it again changes nothing."""
        ...

    async def delete(self, project_id: str, workspace_id: str, thread_id: str) -> bool:
        """Remove the workspace's thread and its turns hint; whether it existed. Its executions
        are not this store's: the caller decides what becomes of them."""
        ...

    # Last of the methods: below it, ``list`` in the class body names it, not the builtin.
    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        """The workspace's threads, newest first (``list_key`` descending), ``limit`` of them
        after skipping ``offset``."""
        ...


def thread_key(project_id: str, workspace_id: str, thread_id: str) -> str:
    """``<project>/<workspace>/<thread>``: the unique key of a thread. The gateway's project and
    workspace ids never contain ``/`` (services/gateway/auth.py), so the first two ``/`` end
    them and two (project, workspace, thread) triples never share a key, whatever the thread id
    holds. Nor does a key of the previous release, ``<project>/<thread>``: the gateway's thread
    ids have no ``/`` either, so those keys hold exactly one."""
    for name, value in (("project", project_id), ("workspace", workspace_id)):
        if "/" in value:
            raise ValueError(f"a {name} id cannot contain '/': {value!r}")
    return f"{project_id}/{workspace_id}/{thread_id}"


def created_key(thread: ThreadRecord) -> str:
    """The creation time as text that sorts like the time: UTC, fixed width, microseconds."""
    return thread.created_at.astimezone(UTC).isoformat(timespec="microseconds")


def list_key(thread: ThreadRecord) -> tuple[str, str]:
    """Where a thread sorts in ``list`` (descending): its creation time, then its id."""
    return created_key(thread), thread.thread_id


KEPT_BESIDE = frozenset({"turns", "ttl_minutes", "expires_at"})
"""The fields adapters keep beside the record's text, each written on its own."""


def body_json(thread: ThreadRecord) -> str:
    """The record as the JSON text adapters store, without ``KEPT_BESIDE``: those are kept
    beside it, where a write of the text (a metadata update) cannot take them back."""
    return thread.model_dump_json(exclude=set(KEPT_BESIDE))


def expiry_time(at: datetime) -> datetime:
    """``at`` as a thread's expiry is kept: UTC, truncated to the millisecond (a BSON date's
    precision; a retention deadline needs no finer). Every adapter stores this, so what it reads
    back is what it was given."""
    if at.utcoffset() is None:
        # Taken as UTC by one driver and as local time by another: refused, like the record's.
        raise ValueError(f"an expiry needs a time zone: {at!r}")
    utc = at.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


def expiry_key(at: datetime) -> str:
    """An expiry as text that sorts like the time (as ``created_key``), for SQLite's index."""
    return expiry_time(at).isoformat(timespec="microseconds")


def check_turn(turn: int) -> None:
    # A negative turn is a caller's bug; noted, it would be a row or field that means nothing.
    if turn < 0:
        raise ValueError(f"a turn cannot be negative: {turn}")


def check_page(limit: int, offset: int) -> None:
    # Drivers read a negative limit, or a zero one, each their own way (MongoDB: 0 is no limit).
    if limit < 0 or offset < 0:
        raise ValueError(f"limit and offset cannot be negative: {limit}, {offset}")
