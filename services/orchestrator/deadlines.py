"""The deadline sweeper: fires what is due of every suspension's deadlines, once each.

Every ``poll`` seconds each orchestrator replica asks the store for suspended executions with
an unfired deadline at or before now (so deadlines that passed while every replica was down
fire on the first sweep after) and fires them in order:

- remind / escalate: publish ``review.deadline`` (its id is ``<execution>:<suspension>:<kind>``),
  then record the deadline as fired with a compare-and-set. Publishing first means a crash in
  between only publishes it again, with the same id, which the notifier deduplicates; two
  replicas racing both publish the same id and one of them records it.
- expire: claim the suspension's one decision (the claim a reviewer's decision also takes) so an
  expiry can never overrule a decision already on its way, then apply it like any event: the
  compare-and-set picks one replica, and the orchestrator publishes the status change and, for
  a default decision, the resume command.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from services.orchestrator import state_machine as sm
from services.orchestrator.handlers import Orchestrator
from shared.background import every
from shared.bus import EventPublisher
from shared.domain.deadlines import DeadlineKind
from shared.domain.execution import Execution
from shared.events import ReviewDeadlineReached
from shared.store.ports import Claim, Store
from shared.topics import Topics

log = structlog.get_logger(__name__)

Clock = Callable[[], datetime]
BATCH = 100


class DeadlineSweeper:
    def __init__(
        self,
        *,
        store: Store,
        publisher: EventPublisher,
        topics: Topics,
        orchestrator: Orchestrator,
        clock: Clock,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._topics = topics
        self._orchestrator = orchestrator
        self._clock = clock

    async def run_forever(self, poll_seconds: float) -> None:
        await every(poll_seconds, self.sweep, failed="deadlines.sweep_failed")

    async def sweep(self) -> int:
        """Fire every due deadline; return how many this replica fired."""
        fired = 0
        for execution in await self._store.executions.due_deadlines(self._clock(), limit=BATCH):
            fired += await self._fire_due(execution)
        return fired

    async def _fire_due(self, execution: Execution) -> int:
        suspension = execution.suspension
        if suspension is None or suspension.deadlines is None:
            return 0
        fired = 0
        for kind in suspension.deadlines.due(self._clock()):
            if kind is DeadlineKind.EXPIRE:
                fired += await self._expire(execution, suspension.suspension_id)
            else:
                await self._announce(execution, kind)
                fired += await self._orchestrator.on_deadline(execution, kind)
            reloaded = await self._store.executions.get(
                execution.project_id, execution.execution_id
            )
            if reloaded is None:
                break
            execution = reloaded
        return fired

    async def _announce(self, execution: Execution, kind: DeadlineKind) -> None:
        suspension = execution.suspension
        assert suspension is not None and suspension.deadlines is not None
        event = ReviewDeadlineReached(
            event_id=f"{execution.execution_id}:{suspension.suspension_id}:{kind.value}",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
            correlation_id=execution.execution_id,
            agent=execution.agent,
            suspension_id=suspension.suspension_id,
            kind=kind.value,
            suspend_context=suspension.suspend_context,
            allowed_decisions=suspension.allowed_decisions,
            reviews=suspension.reviews,
            expire_at=suspension.deadlines.expire_at,
            escalate_to=suspension.deadlines.escalate_to,
        )
        await self._publisher.publish(event, self._topics.deadlines, key=execution.execution_id)

    async def _expire(self, execution: Execution, suspension_id: int) -> int:
        decision_id = sm.expiry_decision_id(execution.execution_id, suspension_id)
        claim = Claim(decision_id, f'{{"expiry": "{decision_id}"}}')
        holder = await self._store.decisions.claim(execution.execution_id, suspension_id, claim)
        if holder.decision_id != decision_id:
            log.info(
                "deadline.expiry_skipped",
                execution_id=execution.execution_id,
                why="a reviewer's decision holds the suspension",
            )
            return 0
        return await self._orchestrator.on_deadline(execution, DeadlineKind.EXPIRE)
