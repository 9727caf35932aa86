"""In-memory adapter of shared/store/progress.py."""

from __future__ import annotations

from shared.store.progress import PROGRESS_PAGE, ProgressEntry


class InMemoryProgressLog:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], dict[str, ProgressEntry]] = {}

    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        stored = self._entries.setdefault((project_id, execution_id), {})
        for entry in entries:
            stored.setdefault(entry.key, entry)

    async def after(
        self, project_id: str, execution_id: str, key: str, *, limit: int = PROGRESS_PAGE
    ) -> list[ProgressEntry]:
        stored = self._entries.get((project_id, execution_id), {})
        return [stored[k] for k in sorted(stored) if k > key][:limit]
