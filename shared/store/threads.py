"""Threads of the LangGraph Agent Server compatible API: a durable conversation, by id.

A thread's run is an execution whose id is derived from the thread's, so the record only has to
exist and be listed. Thread ids are unique per workspace, not globally (callers choose them), so
every adapter keys a thread by (project, workspace, thread) and creating one is an insert under
that key: the one atomic write every server has, so of concurrent creates of one id exactly one
creates. Every read names the workspace: a thread of another workspace is never returned, and
its id is as free here as one never used (nothing tells that it exists). ``metadata`` is the
caller's data: adapters keep it as JSON text, never as document keys.

The previous release keyed threads by (project, thread). Each adapter adopts such records when
it creates its schema (``ensure_indexes``, at every start-up): a record is read under the
workspace it was created in, as before, and nowhere else.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any, Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.events import utc_now


class ThreadRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    project_id: str
    workspace_id: str
    thread_id: str
    created_at: AwareDatetime = Field(default_factory=utc_now)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadStore(Protocol):
    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        """Insert unless the workspace has a thread with this id; return the stored thread (the
        first one, whatever this one's metadata) and whether it was created now. Another
        workspace's thread of the same id is another thread."""
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


def check_page(limit: int, offset: int) -> None:
    # Drivers read a negative limit, or a zero one, each their own way (MongoDB: 0 is no limit).
    if limit < 0 or offset < 0:
        raise ValueError(f"limit and offset cannot be negative: {limit}, {offset}")
