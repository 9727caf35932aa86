"""In-memory adapter of shared/store/approvals.py: kept by generation, so listing one reads
that generation's approvals only."""

from __future__ import annotations

from shared.store.approvals import Approval


class InMemoryApprovals:
    def __init__(self) -> None:
        self._by_generation: dict[tuple[str, int], dict[str, Approval]] = {}

    async def record(self, approval: Approval) -> Approval:
        generation = self._by_generation.setdefault(
            (approval.execution_id, approval.generation), {}
        )
        return generation.setdefault(approval.counted_as, approval)

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        found = self._by_generation.get((execution_id, generation), {})
        return sorted(found.values(), key=lambda a: a.at)
