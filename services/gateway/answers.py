"""What the gateway makes of a judged answer (the rules themselves are in
``shared/domain/judging.py``): what it resolves, the decision event it publishes, and what an
answer that came too late is told about the decision that took the suspension. Pure, no I/O:
``Intake.decide`` reads and writes around these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.gateway.errors import DecisionConflict
from shared.domain.decisions import NotSuspended, resolve_decision
from shared.domain.execution import Execution
from shared.domain.judging import ReviewAnswer as ReviewAnswer
from shared.domain.principals import Reviewer
from shared.domain.review import Resolution
from shared.events import DecisionSubmitted
from shared.store.approvals import Approval


@dataclass(frozen=True)
class DecisionOutcome:
    """What a resume did: the decision published, or an approval recorded toward it."""

    resolution: Resolution
    suspension_id: int
    event: DecisionSubmitted | None
    approvals: list[Approval]
    """The approvals of this answer that count (several owners required), or none."""
    approvals_required: int
    judged: Execution
    """The execution as the answer was judged against it (before the decision applies)."""
    discounted: list[str] = field(default_factory=list)
    """Approvals of this answer that no longer count (a key revoked since), each with why."""

    @property
    def awaiting(self) -> bool:
        return self.event is None

    @property
    def approvals_counted(self) -> int:
        """The distinct people among the approvals that count (one may approve twice)."""
        return len({a.counted_as for a in self.approvals})

    @property
    def approvals_missing(self) -> int:
        """How many more approvals the decision needs before it is published."""
        return max(0, self.approvals_required - self.approvals_counted) if self.awaiting else 0


def resolve(execution: Execution, answer: ReviewAnswer) -> Resolution:
    """What the answer resolves on the suspension it names; a DecisionError if nothing (for an
    answer to a suspension decided already: DecisionConflict, or NotSuspended naming the
    decision that took it)."""
    try:
        return resolve_decision(
            execution,
            decision=answer.decision,
            decisions=answer.decisions,
            reviewer_notes=answer.reviewer_notes,
            interrupt_id=answer.interrupt_id,
            suspension_id=answer.generation,
            resume=answer.resume,
            command=answer.command,
        )
    except NotSuspended as exc:
        _name_the_winner(execution, answer, exc)
        raise


def _name_the_winner(execution: Execution, answer: ReviewAnswer, exc: NotSuspended) -> None:
    last = execution.last_decision
    if last is None or answer.generation not in (None, last.suspension_id):
        return
    taken = winner(last.decision_id, last.decision, last.decisions, last.reviewer)
    if not execution.status.is_terminal:
        # The suspension was just decided and the execution is resuming: a conflict, naming
        # the winner.
        who = last.reviewer or "an anonymous reviewer"
        raise DecisionConflict(
            f"suspension {last.suspension_id} was already decided: {last.decision}"
            f" (decision {last.decision_id}, by {who})",
            taken,
        ) from None
    # Once it ends the answer is "not suspended", still naming the decision that took the
    # suspension: one that lost a race to it may be answered after the end (the run after a
    # decision can be that quick).
    exc.winner = taken


def winner(decision_id: str, summary: str, decisions: Any, reviewer: str | None) -> dict[str, Any]:
    """The decision that took a suspension, as a refused answer is told of it."""
    return {
        "decision_id": decision_id,
        "decision": summary,
        "decisions": [d.model_dump() for d in decisions] if decisions else None,
        "reviewer": reviewer,
    }


def conflict_with(taken: DecisionSubmitted, suspension_id: int) -> DecisionConflict:
    """The answer lost the claim of suspension ``suspension_id`` to ``taken``."""
    said = taken.decision or ", ".join(d.type for d in taken.decisions or []) or "a resume value"
    who = taken.reviewer or "an anonymous reviewer"
    return DecisionConflict(
        f"suspension {suspension_id} already has a decision: {said}"
        f" (decision {taken.decision_id}, by {who})",
        winner(taken.decision_id, said, taken.decisions, taken.reviewer),
    )


def decision_event(
    execution: Execution,
    suspension_id: int,
    answer: ReviewAnswer,
    resolution: Resolution,
    reviewer: Reviewer | None,
    outcome: DecisionOutcome,
    webhook: str | None = None,
) -> DecisionSubmitted:
    """The decision ``answer`` makes, with the approvals that made it (if several were needed)."""
    return DecisionSubmitted(
        execution_id=execution.execution_id,
        correlation_id=execution.execution_id,
        project_id=execution.project_id,
        workspace_id=execution.workspace_id,
        suspension_id=suspension_id,
        decision=resolution.summary if answer.decision is not None else None,
        decisions=answer.decisions,
        resume=answer.resume,
        command=answer.command,
        interrupt_id=answer.interrupt_id,
        reviewer_notes=answer.reviewer_notes,
        reviewer=reviewer.label if reviewer else None,
        approvers=[a.reviewer for a in outcome.approvals] or None,
        discounted_approvers=outcome.discounted or None,
        claimed=True,  # the caller takes the claim; a decision that loses it is never published
        webhook=webhook,
    )
