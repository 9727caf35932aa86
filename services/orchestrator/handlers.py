"""The orchestrator's handlers: load the execution, apply the state machine with a
compare-and-set, then publish what the stored state calls for.

Idempotency: each handler recomputes from the stored execution. A redelivered event changes
nothing (the state machine ignores it) and the follow-ups are published again, so work lost to a
crash between the write and the publish is re-driven, and a duplicate command is recognised
downstream by its deterministic event id and epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from services.orchestrator import state_machine as sm
from shared import metrics, tracing
from shared.agents import AgentRegistry
from shared.bus import EventPublisher, carried_headers
from shared.domain.deadlines import DeadlineKind
from shared.domain.decisions import DecisionError, check_agent_version
from shared.domain.execution import Execution, new_pending_execution
from shared.errors import ConcurrencyConflict, RejectedMessage
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    EventModel,
    ExecutionReported,
    ExecutionRequested,
    ExecutionStatusChanged,
    ExecutionSuspended,
    ReportOutcome,
    utc_now,
)
from shared.faults import fault_point
from shared.store.ports import Claim, Store
from shared.topics import Topics

log = structlog.get_logger(__name__)

MAX_CAS_ATTEMPTS = 8


class DeadlineFired(EventModel):
    """The cause recorded for what a deadline or a sweep does (never published)."""

    execution_id: str
    project_id: str
    workspace_id: str


class Orchestrator:
    def __init__(
        self,
        *,
        store: Store,
        publisher: EventPublisher,
        topics: Topics,
        registry: AgentRegistry,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._topics = topics
        self._registry = registry
        self._clock = clock

    # --- inputs ------------------------------------------------------------------------------

    async def on_requested(self, event: ExecutionRequested) -> None:
        if self._registry.get(event.agent) is None:
            raise RejectedMessage(
                f"unknown agent {event.agent!r}; registered: {', '.join(self._registry.names())}"
            )
        first = new_pending_execution(event, None, tracing.current_carrier())
        execution, _ = await self._store.executions.create(first)
        if (execution.project_id, execution.workspace_id, execution.agent) != (
            event.project_id,
            event.workspace_id,
            event.agent,
        ):
            raise RejectedMessage(
                f"execution id {event.execution_id} is already used by another request"
            )
        await self._apply(execution, lambda e: sm.on_requested(e, event), event)

    async def on_decision(self, event: DecisionSubmitted) -> None:
        execution = await self._load(event)
        for _ in range(MAX_CAS_ATTEMPTS):
            try:
                outcome = sm.on_decision(execution, event)
                if outcome.transitions:
                    current = await self._store.agent_versions.get(execution.agent)
                    check_agent_version(execution, current)
            except DecisionError as exc:
                await self._reject_decision(execution, event, str(exc))
                raise RejectedMessage(str(exc)) from exc
            if outcome.claim is not None:
                claim = Claim(event.decision_id, event.model_dump_json())
                holder = await self._store.decisions.claim(event.execution_id, outcome.claim, claim)
                if holder.decision_id != event.decision_id:
                    reason = f"suspension {outcome.claim} already has a decision"
                    await self._reject_decision(execution, event, reason)
                    raise RejectedMessage(reason)
            if outcome.changed and not await self._store.executions.replace(
                outcome.execution, expected_version=execution.version
            ):
                execution = await self._load(event)
                continue
            if outcome.transitions and execution.suspension is not None:
                # The decision resumed the suspension it answered (a parked one is applied in
                # on_suspended, moments after its suspension, and is not a reviewer's wait).
                waited = self._clock() - execution.suspension.suspended_at
                metrics.REVIEW_WAIT_SECONDS.observe(max(0.0, waited.total_seconds()))
            await self._publish_after(outcome, event)
            return
        raise ConcurrencyConflict(f"execution {event.execution_id} kept changing")

    async def on_cancel(self, event: CancelRequested) -> None:
        execution = await self._load(event)

        def cancel(current: Execution) -> sm.Outcome:
            try:
                return sm.on_cancel(current, event)
            except sm.AlreadyFinished as exc:
                raise RejectedMessage(str(exc)) from exc

        await self._apply(execution, cancel, event)

    # --- sandbox reports ---------------------------------------------------------------------

    async def on_suspended(self, event: ExecutionSuspended) -> None:
        execution = await self._load(event)
        spec = self._registry.get(execution.agent)
        # Absolute times from now, so a restart or a changed agents file never moves them.
        deadlines = spec.deadlines.deadlines_from(self._clock()) if spec else None
        await self._apply(execution, lambda e: sm.on_suspended(e, event, deadlines), event)

    async def on_deadline(self, execution: Execution, kind: DeadlineKind) -> int:
        """Fire one deadline of the current suspension (the sweeper calls this); 1 if this
        call fired it, 0 if it had fired already or the suspension moved on."""
        assert execution.suspension is not None
        suspension_id = execution.suspension.suspension_id
        cause = DeadlineFired(
            event_id=f"{execution.execution_id}:{suspension_id}:{kind.value}",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
        )
        fired = False

        def fire(current: Execution) -> sm.Outcome:
            nonlocal fired
            outcome = sm.on_deadline(current, kind, suspension_id)
            fired = outcome.changed
            return outcome

        await self._apply(execution, fire, cause)
        if fired:
            metrics.DEADLINES_FIRED.labels(kind.value).inc()
            log.info("deadline.fired", kind=kind.value, execution_id=execution.execution_id)
        return int(fired)

    async def abandon(self, execution: Execution, cutoff: datetime) -> int:
        """End a request left undelivered since before ``cutoff`` (the sweeper calls this); 1
        if this call ended it, 0 if a retry delivered it or another replica ended it first."""
        cause = DeadlineFired(
            event_id=f"{execution.execution_id}:abandoned",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
        )
        ended = False

        def end(current: Execution) -> sm.Outcome:
            nonlocal ended
            outcome = sm.on_abandoned(current, cutoff=cutoff)
            ended = bool(outcome.transitions)
            return outcome

        await self._apply(execution, end, cause)
        if ended:
            log.warning("request.abandoned", execution_id=execution.execution_id)
        return int(ended)

    async def on_reported(self, event: ExecutionReported) -> None:
        execution = await self._load(event)
        if event.outcome is ReportOutcome.STARTED:
            await self._apply(execution, lambda e: sm.on_started(e, event), event)
        elif event.outcome is ReportOutcome.REFUSED:
            await self._apply(execution, lambda e: sm.on_refused(e, event), event)
        else:
            await self._apply(execution, lambda e: sm.on_finished(e, event), event)

    # --- plumbing ----------------------------------------------------------------------------

    async def _load(
        self, event: DecisionSubmitted | CancelRequested | ExecutionSuspended | ExecutionReported
    ) -> Execution:
        execution = await self._store.executions.get(event.project_id, event.execution_id)
        if execution is None or execution.workspace_id != event.workspace_id:
            raise RejectedMessage(f"unknown execution {event.execution_id}")
        return execution

    async def _apply(
        self, execution: Execution, step: Callable[[Execution], sm.Outcome], event: EventModel
    ) -> None:
        for _ in range(MAX_CAS_ATTEMPTS):
            outcome = step(execution)
            if outcome.changed and not await self._store.executions.replace(
                outcome.execution, expected_version=execution.version
            ):
                reloaded = await self._store.executions.get(
                    execution.project_id, execution.execution_id
                )
                if reloaded is None:
                    raise RejectedMessage(f"execution {execution.execution_id} disappeared")
                execution = reloaded
                continue
            await self._publish_after(outcome, event)
            return
        raise ConcurrencyConflict(f"execution {execution.execution_id} kept changing")

    async def _reject_decision(
        self, execution: Execution, event: DecisionSubmitted, reason: str
    ) -> None:
        """Record a rejected decision in the audit trail, once per event."""
        for _ in range(MAX_CAS_ATTEMPTS):
            if any(
                a.event_id == event.event_id and a.action == "decision.rejected"
                for a in execution.audit
            ):
                return
            updated = sm.rejected_decision(execution, event, reason)
            if await self._store.executions.replace(updated, expected_version=execution.version):
                return
            execution = await self._load(event)

    async def _publish_after(self, outcome: sm.Outcome, cause: EventModel) -> None:
        execution = outcome.execution
        if outcome.changed:
            fault_point("orchestrator.after_write")
        # Only a stored outcome gets here with transitions (a redelivery has none), so each
        # transition is counted once per compare-and-set that made it.
        for change in outcome.transitions:
            metrics.TRANSITIONS.labels(change.from_status.value, change.to_status.value).inc()
        if outcome.ignored:
            log.info("event.ignored", why=outcome.ignored, status=execution.status.value)
        for command in sm.follow_ups(execution, causation_id=cause.event_id):
            # Marked after the broker acknowledged it: a crash in between re-sends it on
            # redelivery (the sandbox recognises it by its epoch); otherwise it is sent once.
            if await self._store.sent_commands.was_sent(command.event_id):
                continue
            # The caller's custom headers go to the sandbox for this run segment only, as they
            # came: sealed for the sandbox (the orchestrator holds no key to open them).
            await self._publisher.publish(
                command,
                self._topics.dispatched,
                key=execution.execution_id,
                headers=carried_headers(),
            )
            await self._store.sent_commands.mark_sent(command.event_id)
        changes = outcome.transitions or [
            # Nothing changed now; re-announce the current state in case the earlier announcement
            # was lost in a crash. Consumers drop versions they have seen.
            sm.Transition(execution.status, execution.status, sm.status_sequence(execution), None)
        ]
        for change in changes:
            status = ExecutionStatusChanged(
                event_id=f"{execution.execution_id}:status:{change.sequence}",
                execution_id=execution.execution_id,
                project_id=execution.project_id,
                workspace_id=execution.workspace_id,
                agent=execution.agent,
                status=change.to_status,
                previous_status=change.from_status if outcome.transitions else None,
                sequence=change.sequence,
                reason=change.reason,
                causation_id=cause.event_id,
                correlation_id=execution.execution_id,
            )
            await self._publisher.publish(status, self._topics.status, key=execution.execution_id)
