"""In-memory adapter of shared/store/approvals.py."""

from __future__ import annotations

from shared.store.approvals import Approval, approval_id


class InMemoryApprovals:
    def __init__(self) -> None:
        self._approvals: dict[str, Approval] = {}

    async def record(self, approval: Approval) -> Approval:
        return self._approvals.setdefault(approval_id(approval), approval)

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        found = [
            a
            for a in self._approvals.values()
            if a.execution_id == execution_id and a.generation == generation
        ]
        return sorted(found, key=lambda a: a.at)
