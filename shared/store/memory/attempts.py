"""In-memory adapter of shared/store/attempts.py."""

from __future__ import annotations


class InMemoryAttemptLedger:
    def __init__(self) -> None:
        self._latest: dict[tuple[str, int], int] = {}

    async def begin(self, execution_id: str, epoch: int) -> int:
        attempt = self._latest.get((execution_id, epoch), 0) + 1
        self._latest[(execution_id, epoch)] = attempt
        return attempt

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        return self._latest.get((execution_id, epoch), 0) > attempt
