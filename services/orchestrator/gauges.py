"""The executions and pending-reviews gauges: counted in the store, not tracked in memory.

A per-process increment and decrement would be wrong with several orchestrators (each sees a
share of the transitions) and after a restart; a count per status across projects is cheap (an
index on status) and the same on every replica. Only the statuses an execution has yet to
leave are counted: the ended ones grow with the history, and ``interlock_transitions_total``
counts them as they happen.
"""

from __future__ import annotations

import structlog

from shared import metrics
from shared.background import every
from shared.domain.execution import ExecutionStatus
from shared.store.ports import ExecutionStore

log = structlog.get_logger(__name__)


class ExecutionGauges:
    def __init__(self, executions: ExecutionStore) -> None:
        self._executions = executions

    async def refresh(self) -> dict[ExecutionStatus, int]:
        counts = await self._executions.count_live_by_status()
        for status in ExecutionStatus:
            if not status.is_terminal:
                metrics.EXECUTIONS.labels(status.value).set(counts.get(status, 0))
        metrics.PENDING_REVIEWS.set(counts.get(ExecutionStatus.SUSPENDED, 0))
        return counts

    async def run_forever(self, poll_seconds: float) -> None:
        await every(poll_seconds, self.refresh, failed="gauges.refresh_failed", level="warning")
