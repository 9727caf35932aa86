"""In-memory adapter of shared/store/threads.py."""

from __future__ import annotations

from shared.store.threads import ThreadRecord, check_page, list_key


class InMemoryThreads:
    def __init__(self) -> None:
        self._threads: dict[tuple[str, str, str], ThreadRecord] = {}

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        key = (thread.project_id, thread.workspace_id, thread.thread_id)
        if key in self._threads:
            return self._threads[key], False
        self._threads[key] = thread
        return thread, True

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        return self._threads.get((project_id, workspace_id, thread_id))

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        found = (self._threads.get((project_id, workspace_id, t)) for t in thread_ids)
        return {t.thread_id: t for t in found if t is not None}

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        matching = sorted(
            (
                t
                for t in self._threads.values()
                if t.project_id == project_id and t.workspace_id == workspace_id
            ),
            key=list_key,
            reverse=True,
        )
        return matching[offset : offset + limit]
