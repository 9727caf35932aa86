"""The execution state machine: how each event moves a stored execution. Pure, no I/O.

Every function takes the execution as stored plus one event and returns an ``Outcome``: the
execution as it should be stored next (or unchanged), the transitions made, and why an event was
ignored. The handlers persist the new state with a compare-and-set on ``version`` and then publish
what ``follow_ups`` derives from the stored state, so a redelivered event re-drives missing work
instead of repeating it.

Sandbox reports carry the epoch of the dispatch they answer. Reports from any other epoch are
stale (a redelivered old command, a crashed attempt) and change nothing. Reports of one epoch may
arrive out of order, because ``execution.suspended`` and ``execution.reported`` are different
topics: a suspension seen before its ``started`` report implies the ``running`` step.
"""

from __future__ import annotations

from datetime import datetime

# Named here too: the handlers and tests read a transition's vocabulary from the module whose
# functions return outcomes, and catch AlreadyFinished from the one that raises it.
from services.orchestrator.transitions import ALLOWED_TRANSITIONS as ALLOWED_TRANSITIONS
from services.orchestrator.transitions import IllegalTransition as IllegalTransition
from services.orchestrator.transitions import Outcome as Outcome
from services.orchestrator.transitions import Transition as Transition
from services.orchestrator.transitions import Walk, with_audit
from services.orchestrator.transitions import status_sequence as status_sequence
from services.orchestrator.transitions import transition as transition
from shared.domain.cancellation import AlreadyFinished as AlreadyFinished
from shared.domain.cancellation import check_cancellable
from shared.domain.deadlines import CANCEL, DeadlineKind, Deadlines
from shared.domain.decisions import DecisionError, resolve_decision
from shared.domain.execution import (
    AuditEntry,
    Decision,
    Execution,
    ExecutionStatus,
    RunWebhook,
    Suspension,
)
from shared.domain.review import described, summary_of
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    DispatchKind,
    ExecutionDispatched,
    ExecutionReported,
    ExecutionRequested,
    ExecutionSuspended,
    ReportOutcome,
    ResumeInstruction,
    utc_now,
)

S = ExecutionStatus

ORCHESTRATOR = "orchestrator"
SANDBOX = "sandbox"
CUSTOM_HEADERS_UNREADABLE = "custom_headers.unreadable"
"""Audit action: a run went without the custom headers it was sent with (shared/custom_headers)."""


def on_requested(execution: Execution, event: ExecutionRequested) -> Outcome:
    """A pending, never-dispatched execution gets its first epoch; anything else is a duplicate."""
    if execution.status is S.PENDING and execution.epoch == 0:
        entry = AuditEntry(
            actor=ORCHESTRATOR, action="dispatched", reason="epoch 1", event_id=event.event_id
        )
        return Outcome(with_audit(execution, entry).model_copy(update={"epoch": 1}))
    return Outcome(execution, ignored="already dispatched")


def on_abandoned(execution: Execution, *, cutoff: datetime) -> Outcome:
    """A request the gateway could not deliver (its client was told 503 and to retry) that no
    retry delivered since ``cutoff``: it ends in ``error`` rather than waiting forever, and a late
    copy of the request is then ignored, as the 503 said."""
    since = execution.undelivered_since
    if execution.status is not S.PENDING or execution.epoch != 0 or since is None:
        return Outcome(execution, ignored="the request was delivered")
    if since > cutoff:
        return Outcome(execution, ignored="not undelivered for long enough")
    message = (
        "the request never reached the event bus (the client was answered 503) and was not"
        " retried; invoke again"
    )
    walk = Walk(execution)
    walk.to(
        S.ERROR,
        actor=ORCHESTRATOR,
        reason="request not delivered",
        error={"error_type": "RequestNotDelivered", "message": message},
    )
    return walk.outcome()


def on_started(execution: Execution, report: ExecutionReported) -> Outcome:
    if report.epoch != execution.epoch:
        return Outcome(execution, ignored=f"stale epoch {report.epoch} (now {execution.epoch})")
    unreadable = _unreadable_headers(execution, report)
    if execution.status not in (S.PENDING, S.RESUMING):
        if unreadable is None or execution.status.is_terminal:
            return Outcome(execution, ignored=f"already {execution.status.value}")
        # Its suspension overtook the report (another topic): the run still went without them.
        return Outcome(with_audit(execution, unreadable))
    walk = Walk(execution)
    walk.to(
        S.RUNNING, actor=SANDBOX, reason=f"attempt {report.epoch} started", event_id=report.event_id
    )
    if unreadable is not None:
        walk.execution = with_audit(walk.execution, unreadable)
    return walk.outcome()


def _unreadable_headers(execution: Execution, report: ExecutionReported) -> AuditEntry | None:
    """The audit entry of a run that went without the caller's custom headers because they did
    not open in the sandbox (once per report: a redelivery finds it recorded)."""
    if report.custom_headers_unreadable is None or any(
        a.event_id == report.event_id and a.action == CUSTOM_HEADERS_UNREADABLE
        for a in execution.audit
    ):
        return None
    return AuditEntry(
        actor=SANDBOX,
        action=CUSTOM_HEADERS_UNREADABLE,
        reason=f"attempt {report.epoch} runs without the custom headers sent with it:"
        f" {report.custom_headers_unreadable}",
        event_id=report.event_id,
    )


def on_suspended(
    execution: Execution, event: ExecutionSuspended, deadlines: Deadlines | None = None
) -> Outcome:
    if event.epoch != execution.epoch:
        return Outcome(execution, ignored=f"stale epoch {event.epoch} (now {execution.epoch})")
    if execution.status not in (S.PENDING, S.RESUMING, S.RUNNING):
        return Outcome(execution, ignored=f"already {execution.status.value}")
    walk = Walk(execution)
    if execution.status is not S.RUNNING:
        walk.to(S.RUNNING, actor=SANDBOX, reason="implied by suspension", event_id=event.event_id)
    suspension = Suspension(
        suspension_id=event.suspension_id,
        suspend_context=event.suspend_context,
        allowed_decisions=event.allowed_decisions,
        interrupt_ids=[i.interrupt_id for i in event.interrupts],
        suspended_at=event.suspended_at,
        agent_fingerprint=event.agent_fingerprint,
        reviews=event.reviews,
        tools=event.tools,
        deadlines=deadlines,
        interrupts=event.interrupts,
        values=event.values,
        next=event.next,
    )
    walk.to(
        S.SUSPENDED,
        actor=SANDBOX,
        reason="agent interrupted for human review",
        event_id=event.event_id,
        suspension=suspension,
    )
    _settle_parked(walk, event.event_id)
    return walk.outcome()


def on_finished(execution: Execution, report: ExecutionReported) -> Outcome:
    if report.epoch != execution.epoch:
        return Outcome(execution, ignored=f"stale epoch {report.epoch} (now {execution.epoch})")
    if execution.status not in (S.PENDING, S.RESUMING, S.RUNNING):
        return Outcome(execution, ignored=f"already {execution.status.value}")
    walk = Walk(execution)
    if execution.status is not S.RUNNING:
        walk.to(S.RUNNING, actor=SANDBOX, reason="implied by report", event_id=report.event_id)
    if report.outcome is ReportOutcome.COMPLETED:
        walk.to(
            S.COMPLETED,
            actor=SANDBOX,
            reason="agent finished",
            event_id=report.event_id,
            result=report.result,
            suspension=None,
        )
    else:
        error = report.error
        walk.to(
            S.ERROR,
            actor=SANDBOX,
            reason=error.message if error else "agent failed",
            event_id=report.event_id,
            error=error.model_dump() if error else {"error_type": "unknown", "message": ""},
            suspension=None,
        )
    _settle_parked(walk, report.event_id)
    return walk.outcome()


def on_refused(execution: Execution, report: ExecutionReported) -> Outcome:
    """The sandbox would not resume (the agent's code changed, or it cannot be loaded): suspend
    again, as a new suspension, so a decision can be submitted once the code is reverted,
    declared compatible or fixed."""
    if report.epoch != execution.epoch:
        return Outcome(execution, ignored=f"stale epoch {report.epoch} (now {execution.epoch})")
    # The sandbox reports a run started before it reads the checkpoint and refuses, so the
    # refusal finds the resume running (its epoch says it is this resume's).
    if execution.status not in (S.RESUMING, S.RUNNING) or execution.suspension is None:
        return Outcome(execution, ignored=f"already {execution.status.value}")
    reason = report.error.message if report.error else "the sandbox refused to resume"
    walk = Walk(execution)
    walk.to(
        S.SUSPENDED,
        actor=SANDBOX,
        reason=reason,
        event_id=report.event_id,
        suspension=execution.suspension.model_copy(update={"suspension_id": execution.epoch}),
    )
    return walk.outcome()


def on_cancel(execution: Execution, event: CancelRequested) -> Outcome:
    """Cancel at once. The epoch moves on, so a run still under way is stale from now on: its
    reports are ignored and a queued command for it is skipped."""
    if execution.status is S.CANCELLED:
        return Outcome(execution, ignored="already cancelled")
    check_cancellable(execution)
    walk = Walk(execution)
    walk.to(
        S.CANCELLED,
        actor=event.requested_by or "producer",
        reason=event.reason or "cancelled",
        event_id=event.event_id,
        epoch=execution.epoch + 1,
        suspension=None,
        parked_decision=None,
        stopped_values=execution.suspension.values if execution.suspension else None,
    )
    return walk.outcome()


DEADLINES = "system:deadlines"
"""The actor of what deadlines do, in the audit trail."""


def on_deadline(execution: Execution, kind: DeadlineKind, suspension_id: int) -> Outcome:
    """Fire one deadline of the current suspension: remind and escalate are recorded (the
    sweeper has announced them); expire cancels (``expired``) or takes the declared decision.
    A deadline of another suspension, or one fired already, changes nothing."""
    suspension = execution.suspension
    if execution.status is not S.SUSPENDED or suspension is None:
        return Outcome(execution, ignored=f"not suspended ({execution.status.value})")
    if suspension.suspension_id != suspension_id or suspension.deadlines is None:
        return Outcome(execution, ignored=f"suspension {suspension_id} is not the current one")
    if kind in suspension.deadlines.fired:
        return Outcome(execution, ignored=f"{kind.value} already fired")
    deadlines = suspension.deadlines.with_fired(kind)
    fired = execution.model_copy(
        update={"suspension": suspension.model_copy(update={"deadlines": deadlines})}
    )
    if kind is not DeadlineKind.EXPIRE:
        entry = AuditEntry(
            actor=DEADLINES,
            action=f"deadline.{kind.value}",
            reason=f"suspension {suspension_id} still waits for a review",
        )
        return Outcome(with_audit(fired, entry))
    walk = Walk(fired)
    if deadlines.on_expiry == CANCEL:
        walk.to(
            S.EXPIRED,
            actor=DEADLINES,
            reason=f"no review of suspension {suspension_id} before {deadlines.expire_at}",
            epoch=execution.epoch + 1,
            suspension=None,
            parked_decision=None,
        )
        return walk.outcome()
    try:
        resolution = resolve_decision(
            fired,
            decision=deadlines.on_expiry,
            decisions=None,
            reviewer_notes="taken by the system: no review before the deadline",
            interrupt_id=None,
            suspension_id=suspension_id,
        )
    except DecisionError as exc:
        # The declared default does not fit this suspension (an action review, say): expire.
        walk.to(
            S.EXPIRED,
            actor=DEADLINES,
            reason=f"no review before the deadline; on_expiry {deadlines.on_expiry!r}: {exc}",
            epoch=execution.epoch + 1,
            suspension=None,
            parked_decision=None,
        )
        return walk.outcome()
    record = Decision(
        decision_id=expiry_decision_id(execution.execution_id, suspension_id),
        suspension_id=suspension_id,
        decision=resolution.summary,
        reviewer=DEADLINES,
        reviewer_notes="taken by the system: no review before the deadline",
        values=resolution.values,
    )
    _resume(walk, record, None)
    return Outcome(walk.execution, walk.transitions, claim=suspension_id)


def expiry_decision_id(execution_id: str, suspension_id: int) -> str:
    return f"{execution_id}:{suspension_id}:expiry"


def on_decision(execution: Execution, event: DecisionSubmitted) -> Outcome:
    """Validate and apply a decision; a repeat of any applied decision is a no-op.

    A decision naming the suspension that the attempt in flight is about to report is parked and
    applied when that suspension is recorded. Raises ``DecisionError`` when the decision cannot
    apply; the caller records that in the audit trail and dead-letters the event.
    """
    parked = execution.parked_decision
    known = [*execution.decisions, *([parked] if parked else [])]
    if any(d.decision_id == event.decision_id for d in known):
        return Outcome(execution, ignored="decision already applied")
    if _answers_suspension_in_flight(execution, event) and parked is None:
        assert event.suspension_id is not None
        record = _decision_record(event, _describe(event), event.suspension_id)
        entry = AuditEntry(
            actor=event.reviewer or "producer",
            action="decision.parked",
            reason=f"{_describe(event)!r} for suspension {event.suspension_id}, not yet recorded",
            event_id=event.event_id,
        )
        parked_now = with_audit(execution, entry).model_copy(update={"parked_decision": record})
        return Outcome(parked_now, claim=event.suspension_id)
    resolution = resolve_decision(
        execution,
        decision=event.decision,
        decisions=event.decisions,
        reviewer_notes=event.reviewer_notes,
        interrupt_id=event.interrupt_id,
        suspension_id=event.suspension_id,
        resume=event.resume,
        command=event.command,
    )
    assert execution.suspension is not None  # resolve_decision checked it
    suspension_id = execution.suspension.suspension_id
    summary = described(resolution, event.command)
    record = _decision_record(event, summary, suspension_id).model_copy(
        update={"values": resolution.values, "edits": resolution.edits}
    )
    walk = Walk(execution)
    _resume(walk, record, event.event_id)
    return Outcome(walk.execution, walk.transitions, claim=suspension_id)


def _describe(event: DecisionSubmitted) -> str:
    if event.decision is not None:
        return event.decision
    if event.resume is not None:
        return summary_of(event.resume)
    if event.decisions is None and event.command is not None:
        return event.command.summary()
    return ", ".join(d.type for d in event.decisions or [])


def _word_of(parked: Decision) -> str | None:
    """The Atlas word a parked decision was given as, or None for another form (a parked
    record keeps ``_describe``'s line: the word, or a command's own summary when alone)."""
    if parked.decisions is not None or parked.resume is not None:
        return None
    if parked.command is not None and parked.decision == parked.command.summary():
        return None
    return parked.decision


def _answers_suspension_in_flight(execution: Execution, event: DecisionSubmitted) -> bool:
    in_flight = execution.status in (S.PENDING, S.RUNNING, S.RESUMING)
    return in_flight and event.suspension_id is not None and event.suspension_id == execution.epoch


def _decision_record(event: DecisionSubmitted, decision: str, suspension_id: int) -> Decision:
    return Decision(
        decision_id=event.decision_id,
        suspension_id=suspension_id,
        decision=decision,
        decisions=event.decisions,
        resume=event.resume,
        command=event.command,
        interrupt_id=event.interrupt_id,
        reviewer_notes=event.reviewer_notes,
        reviewer=event.reviewer,
        approvers=event.approvers,
        discounted_approvers=event.discounted_approvers,
        decided_at=event.occurred_at,
        webhook=event.webhook,
    )


def _resume(walk: Walk, record: Decision, event_id: str | None) -> None:
    epoch = walk.execution.epoch + 1
    webhooks = walk.execution.webhooks
    if record.webhook is not None:
        webhooks = [
            *webhooks,
            RunWebhook(epoch=epoch, url=record.webhook, requested_at=record.decided_at),
        ]
    walk.to(
        S.RESUMING,
        actor=record.reviewer or "reviewer",
        reason=f"decision {record.decision}",
        event_id=event_id,
        decisions=[*walk.execution.decisions, record],
        epoch=epoch,
        parked_decision=None,
        webhooks=webhooks,
    )


def _settle_parked(walk: Walk, event_id: str | None) -> None:
    """Apply the parked decision to the suspension just recorded, or reject it for good."""
    parked = walk.execution.parked_decision
    if parked is None:
        return
    current = walk.execution.suspension
    if (
        walk.execution.status is S.SUSPENDED
        and current
        and current.suspension_id == parked.suspension_id
    ):
        try:
            resolution = resolve_decision(
                walk.execution,
                decision=_word_of(parked),
                decisions=parked.decisions,
                reviewer_notes=parked.reviewer_notes,
                interrupt_id=parked.interrupt_id,
                suspension_id=parked.suspension_id,
                resume=parked.resume,
                command=parked.command,
            )
        except DecisionError as exc:
            reason = str(exc)
        else:
            applied = parked.model_copy(
                update={
                    "decision": described(resolution, parked.command),
                    "values": resolution.values,
                    "edits": resolution.edits,
                }
            )
            _resume(walk, applied, event_id)
            return
    else:
        reason = f"the attempt ended {walk.execution.status.value} without suspending"
    entry = AuditEntry(
        actor=parked.reviewer or "producer",
        action="decision.rejected",
        reason=f"{parked.decision!r}: {reason}",
        event_id=event_id,
    )
    walk.execution = with_audit(walk.execution, entry).model_copy(update={"parked_decision": None})


DECISION_REJECTED = "decision.rejected"
"""Audit action: a decision from a known sender that cannot apply (not suspended, not allowed)."""
DECISION_REFUSED = "decision.refused"
"""Audit action: a registered outside producer may not give this decision (scope, role,
separation of duties)."""
DECISION_UNAUTHENTICATED = "decision.unauthenticated"
"""Audit action: a decision on the bus that neither the gateway nor a registered producer
signed; its reviewer and approvers are what it claimed, never an identity."""


CANCEL_REFUSED = "cancel.refused"
"""Audit action: a registered outside producer may not cancel this execution (scope, role)."""
CANCEL_UNAUTHENTICATED = "cancel.unauthenticated"
"""Audit action: a cancellation on the bus that neither the gateway nor a registered producer
signed."""


def rejected_decision(
    execution: Execution,
    event: DecisionSubmitted,
    reason: str,
    *,
    action: str = DECISION_REJECTED,
    actor: str | None = None,
) -> Execution:
    return with_audit(execution, decision_refusal(event, reason, action=action, actor=actor))


def decision_refusal(
    event: DecisionSubmitted, reason: str, *, action: str, actor: str | None
) -> AuditEntry:
    """The audit entry of a decision that was not applied, and why."""
    return AuditEntry(
        actor=actor or event.reviewer or "producer",
        action=action,
        reason=f"{_describe(event)!r}: {reason}",
        event_id=event.event_id,
    )


def follow_ups(execution: Execution, *, causation_id: str | None) -> list[ExecutionDispatched]:
    """The command the stored state calls for, if any. Deterministic event ids let the sandbox
    recognise a re-sent command."""
    common = {
        "execution_id": execution.execution_id,
        "project_id": execution.project_id,
        "workspace_id": execution.workspace_id,
        "agent": execution.agent,
        "epoch": execution.epoch,
        "causation_id": causation_id,
        "correlation_id": execution.execution_id,
        "event_id": f"{execution.execution_id}:dispatch:{execution.epoch}",
        "occurred_at": utc_now(),
        "execution_version": execution.version if execution.version >= 2 else None,
        "execution_trace": execution.trace_context,
    }
    if execution.status is S.PENDING and execution.epoch >= 1:
        return [ExecutionDispatched(kind=DispatchKind.START, input=execution.input, **common)]
    decision = execution.last_decision
    if execution.status is S.RESUMING and decision is not None and execution.suspension:
        answered = list(decision.values) if decision.values else execution.suspension.interrupt_ids
        resume = ResumeInstruction(
            suspension_id=decision.suspension_id,
            interrupt_ids=answered,
            decision=decision.decision,
            reviewer_notes=decision.reviewer_notes,
            reviewer=decision.reviewer,
            agent_fingerprint=execution.suspension.agent_fingerprint,
            values=decision.values,
            decided_at=decision.decided_at,
            command=decision.command,
        )
        return [ExecutionDispatched(kind=DispatchKind.RESUME, resume=resume, **common)]
    return []
