"""Ends requests the gateway could not deliver and nobody retried.

An invoke stores its execution, then publishes ``execution.requested``. When the publish fails
(the broker is down) the client is answered 503 and told to retry; the gateway marks the
execution ``undelivered_since``. A retry with the same idempotency key clears the mark and
publishes again. A client that never retries leaves a pending execution nobody will run: after
``abandon_after`` this sweep ends it in ``error`` (``RequestNotDelivered``), so nothing stays
pending forever. A late delivery of the timed-out publish is then ignored, as the 503 said.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from services.orchestrator.handlers import Orchestrator
from shared.background import every
from shared.store.ports import ExecutionStore

log = structlog.get_logger(__name__)

BATCH = 100


class AbandonedRequests:
    def __init__(
        self,
        *,
        executions: ExecutionStore,
        orchestrator: Orchestrator,
        clock: Callable[[], datetime],
        abandon_after: timedelta,
    ) -> None:
        self._executions = executions
        self._orchestrator = orchestrator
        self._clock = clock
        self._abandon_after = abandon_after

    async def sweep(self) -> int:
        cutoff = self._clock() - self._abandon_after
        ended = 0
        for execution in await self._executions.undelivered_before(cutoff, limit=BATCH):
            ended += await self._orchestrator.abandon(execution, cutoff)
        return ended

    async def run_forever(self, poll_seconds: float) -> None:
        await every(poll_seconds, self.sweep, failed="abandoned.sweep_failed")
