"""The in-memory store: for unit tests. Passes the same contract suite as the SQLite and MongoDB
adapters."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from shared.domain.execution import Execution, ExecutionStatus, next_deadline, undelivered
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.memory.agent_versions import InMemoryAgentVersions
from shared.store.memory.api_keys import InMemoryApiKeys
from shared.store.memory.approvals import InMemoryApprovals
from shared.store.memory.attempts import InMemoryAttemptLedger
from shared.store.memory.crons import InMemoryCrons
from shared.store.memory.erasure import InMemoryErasure
from shared.store.memory.links import InMemorySpentLinks
from shared.store.memory.memories import InMemoryMemories
from shared.store.memory.notifications import InMemoryNotifications
from shared.store.memory.progress import InMemoryProgressLog
from shared.store.memory.threads import InMemoryThreads
from shared.store.ports import Claim, Page, StepRecord, Written


def _sort_key(execution: Execution) -> tuple[str, str]:
    return (execution.created_at.isoformat(), execution.execution_id)


class InMemoryExecutionStore:
    def __init__(self) -> None:
        self._items: dict[str, Execution] = {}

    async def due_deadlines(self, now: datetime, *, limit: int = 100) -> list[Execution]:
        return await _due(list(self._items.values()), now, limit)

    async def undelivered_before(self, cutoff: datetime, *, limit: int = 100) -> list[Execution]:
        return undelivered(list(self._items.values()), cutoff, limit)

    async def count_live_by_status(self) -> dict[ExecutionStatus, int]:
        return dict(Counter(e.status for e in self._items.values() if not e.status.is_terminal))

    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        existing = self._items.get(execution.execution_id)
        if existing is not None:
            return existing, False
        first = execution.model_copy(update={"version": 1})
        self._items[execution.execution_id] = first
        return first, True

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        found = self._items.get(execution_id)
        return found if found is not None and found.project_id == project_id else None

    async def replace(self, current: Execution, successor: Execution) -> Execution | None:
        if successor.execution_id != current.execution_id:
            raise ValueError("a successor must be of the same execution")
        stored = self._items.get(current.execution_id)
        if stored is None or stored.version != current.version:
            return None
        self._items[current.execution_id] = successor.model_copy(
            update={"version": current.version + 1}
        )
        return self._items[current.execution_id]

    async def compare_and_set(self, current: Execution, successor: Execution) -> Written | None:
        stored = await self.replace(current, successor)
        return None if stored is None else Written(stored)

    async def mark_waiting(self, execution: Execution) -> None:
        return None  # the sweeps read the executions themselves

    async def unchanged_since(self, execution_id: str, version: int) -> bool:
        found = self._items.get(execution_id)
        return found is not None and found.version == version

    async def list(
        self,
        project_id: str,
        workspace_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor) if cursor else None
        matching = sorted(
            (
                e
                for e in self._items.values()
                if e.project_id == project_id
                and e.workspace_id == workspace_id
                and (status is None or e.status is status)
                and (after is None or _sort_key(e) > after)
            ),
            key=_sort_key,
        )
        page = matching[:limit]
        more = len(matching) > limit
        return Page(page, encode_cursor(*_sort_key(page[-1])) if more and page else None)


async def _due(items: list[Execution], now: datetime, limit: int) -> list[Execution]:
    due = [(at, e) for e in items if (at := next_deadline(e)) is not None and at <= now]
    return [e for _, e in sorted(due, key=lambda pair: pair[0])][:limit]


class InMemoryDecisionClaims:
    def __init__(self) -> None:
        self._claims: dict[tuple[str, int], Claim] = {}

    async def claim(self, execution_id: str, suspension_id: int, claim: Claim) -> Claim:
        return self._claims.setdefault((execution_id, suspension_id), claim)

    async def holder(self, execution_id: str, suspension_id: int) -> Claim | None:
        return self._claims.get((execution_id, suspension_id))


class InMemoryStepStore:
    def __init__(self) -> None:
        self._records: dict[str, StepRecord] = {}

    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        return {k: r for k, r in self._records.items() if r.execution_id == execution_id}

    async def get(self, key: str) -> StepRecord | None:
        return self._records.get(key)

    async def put(self, record: StepRecord) -> StepRecord:
        return self._records.setdefault(record.key, record)


class InMemoryStore:
    def __init__(self) -> None:
        self.executions = InMemoryExecutionStore()
        self.decisions = InMemoryDecisionClaims()
        self.steps = InMemoryStepStore()
        self.attempts = InMemoryAttemptLedger()
        self.agent_versions = InMemoryAgentVersions()
        self.api_keys = InMemoryApiKeys()
        self.approvals = InMemoryApprovals()
        self.spent_links = InMemorySpentLinks()
        self.progress = InMemoryProgressLog()
        self.notifications = InMemoryNotifications()
        self.threads = InMemoryThreads()
        self.memories = InMemoryMemories()
        self.crons = InMemoryCrons()
        self.erasure = InMemoryErasure(self)

    async def ensure_indexes(self) -> None:
        return None

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None
