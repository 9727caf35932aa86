"""In-memory adapter of shared/store/threads.py.

The turns hints are a dict of their own beside the records, as the other adapters keep them
apart: a record replaced by a metadata update carries no turns that could undo a note. The ttl
and expiry are the record's own fields here: every write below replaces the record from the one
stored, in one step of the event loop, so none can undo another's."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from shared.store.threads import ThreadRecord, check_page, check_turn, expiry_time, list_key

Key = tuple[str, str, str]


class InMemoryThreads:
    def __init__(self) -> None:
        self._threads: dict[Key, ThreadRecord] = {}
        self._turns: dict[Key, int] = {}

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        key = (thread.project_id, thread.workspace_id, thread.thread_id)
        if key in self._threads:
            return self._read(key), False
        self._threads[key] = thread
        self._turns[key] = thread.turns
        return thread, True

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        key = (project_id, workspace_id, thread_id)
        return self._read(key) if key in self._threads else None

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        keys = [(project_id, workspace_id, t) for t in thread_ids]
        return {key[2]: self._read(key) for key in keys if key in self._threads}

    async def note_turn(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        turn: int,
        *,
        expires_at: datetime | None = None,
    ) -> None:
        check_turn(turn)
        key = (project_id, workspace_id, thread_id)
        stored = self._threads.get(key)
        if stored is None:
            return
        if expires_at is not None:
            if stored.deleted:  # as the other adapters' one write: neither hint nor expiry
                return
            later = expiry_time(expires_at)
            if stored.expires_at is None or later > stored.expires_at:
                self._threads[key] = stored.model_copy(update={"expires_at": later})
        self._turns[key] = max(self._turns.get(key, 0), turn)

    async def set_ttl(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        ttl_minutes: float | None,
        expires_at: datetime | None,
    ) -> ThreadRecord | None:
        key = (project_id, workspace_id, thread_id)
        stored = self._threads.get(key)
        if stored is None:
            return None
        if not stored.deleted:  # a tombstone is never given a ttl
            self._threads[key] = stored.model_copy(
                update={
                    "ttl_minutes": None if ttl_minutes is None else float(ttl_minutes),
                    "expires_at": None if expires_at is None else expiry_time(expires_at),
                }
            )
        return self._read(key)

    async def expired(self, now: datetime, *, limit: int) -> list[ThreadRecord]:
        check_page(limit, 0)
        due = sorted(
            (
                (thread.expires_at, key)
                for key, thread in self._threads.items()
                if thread.expires_at is not None and thread.expires_at <= now
            ),
        )
        return [self._read(key) for _, key in due[:limit]]

    async def set_metadata(
        self, project_id: str, workspace_id: str, thread_id: str, metadata: dict[str, Any]
    ) -> ThreadRecord | None:
        key = (project_id, workspace_id, thread_id)
        stored = self._threads.get(key)
        if stored is None:
            return None
        if stored.deleted:  # a tombstone keeps its empty metadata
            return self._read(key)
        # A copy, as the other adapters store JSON: the caller's dict changed later changes nothing.
        self._threads[key] = stored.model_copy(update={"metadata": copy.deepcopy(metadata)})
        return self._read(key)

    async def mark_deleted(
        self, project_id: str, workspace_id: str, thread_id: str, at: datetime
    ) -> ThreadRecord | None:
        key = (project_id, workspace_id, thread_id)
        stored = self._threads.get(key)
        if stored is None:
            return None
        due = expiry_time(at)  # its erasure is due now (and a naive time is refused)
        if not stored.deleted:  # marked already: the first mark's time and the expiry stay
            self._threads[key] = stored.model_copy(
                update={"metadata": {}, "deleted_at": at, "ttl_minutes": None, "expires_at": due}
            )
        return self._read(key)

    async def erasure_done(self, project_id: str, workspace_id: str, thread_id: str) -> None:
        key = (project_id, workspace_id, thread_id)
        stored = self._threads.get(key)
        if stored is not None and stored.deleted:  # a live thread's expiry is its ttl's
            self._threads[key] = stored.model_copy(update={"expires_at": None})

    async def delete(self, project_id: str, workspace_id: str, thread_id: str) -> bool:
        key = (project_id, workspace_id, thread_id)
        self._turns.pop(key, None)
        return self._threads.pop(key, None) is not None

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        matching = sorted(
            (
                key
                for key, thread in self._threads.items()
                if key[0] == project_id and key[1] == workspace_id and not thread.deleted
            ),
            key=lambda key: list_key(self._threads[key]),
            reverse=True,
        )
        return [self._read(key) for key in matching[offset : offset + limit]]

    def _read(self, key: Key) -> ThreadRecord:
        return self._threads[key].model_copy(update={"turns": self._turns.get(key, 0)})
