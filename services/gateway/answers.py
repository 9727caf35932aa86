"""A reviewer's answer, judged before anything is stored or published: may this reviewer give
it, does it approve, which approvals count together, and what an answer that came too late is
told about the decision that took the suspension. Pure, no I/O: ``Intake.decide`` reads and
writes around these."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from services.gateway.errors import DecisionConflict
from shared.agents import ReviewRules
from shared.domain.decisions import NotSuspended, resolve_decision
from shared.domain.execution import Execution
from shared.domain.principals import Reviewer, check_link_approval, check_reviewer
from shared.domain.review import Resolution
from shared.events import ActionDecision, DecisionSubmitted
from shared.store.approvals import Approval


class ReviewAnswer(BaseModel):
    """A reviewer's answer as the API takes it (see services/gateway/schemas.ResumeRequest)."""

    decision: str | None = None
    decisions: list[ActionDecision] | None = None
    interrupt_id: str | None = None
    generation: int | None = None
    reviewer_notes: str | None = None


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


def approving(answer: ReviewAnswer) -> bool:
    """Does the answer let something run? A rejection (of everything) acts at once."""
    if answer.decisions is not None:
        return any(d.type != "reject" for d in answer.decisions)
    return (answer.decision or "").strip().casefold() != "reject"


def answer_key(answer: ReviewAnswer, resolution: Resolution) -> str:
    """Approvals count together when they say the same thing; notes may differ."""
    said = {
        "interrupts": sorted(resolution.values),
        "decision": resolution.summary if answer.decisions is None else None,
        "decisions": [d.model_dump() for d in answer.decisions or []],
    }
    return hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()


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
    said = taken.decision or ", ".join(d.type for d in taken.decisions or [])
    who = taken.reviewer or "an anonymous reviewer"
    return DecisionConflict(
        f"suspension {suspension_id} already has a decision: {said}"
        f" (decision {taken.decision_id}, by {who})",
        winner(taken.decision_id, said, taken.decisions, taken.reviewer),
    )


def check_may_decide(
    reviewer: Reviewer, execution: Execution, rules: ReviewRules, answer: ReviewAnswer
) -> None:
    """Separation of duties: raise SeparationOfDuties when ``reviewer`` may not give ``answer``."""
    check_reviewer(
        reviewer,
        agent=execution.agent,
        self_approval=rules.self_approval,
        requester_identity=execution.requester_identity,
        requester_label=execution.requested_by,
    )
    if approving(answer):
        check_link_approval(reviewer, agent=execution.agent, link_approvals=rules.link_approvals)


def approval_of(
    execution: Execution,
    suspension_id: int,
    answer: ReviewAnswer,
    resolution: Resolution,
    reviewer: Reviewer | None,
) -> Approval:
    """The approval ``answer`` gives toward a decision that needs several."""
    return Approval(
        execution_id=execution.execution_id,
        generation=suspension_id,
        reviewer=reviewer.label if reviewer else "anonymous",
        identity=reviewer.identity if reviewer else None,
        key_id=reviewer.key_id if reviewer else None,
        via_link=reviewer.via_link if reviewer else False,
        answer_key=answer_key(answer, resolution),
        summary=resolution.summary,
        reviewer_notes=answer.reviewer_notes,
    )


def decision_event(
    execution: Execution,
    suspension_id: int,
    answer: ReviewAnswer,
    resolution: Resolution,
    reviewer: Reviewer | None,
    outcome: DecisionOutcome,
) -> DecisionSubmitted:
    """The decision ``answer`` makes, with the approvals that made it (if several were needed)."""
    return DecisionSubmitted(
        execution_id=execution.execution_id,
        correlation_id=execution.execution_id,
        project_id=execution.project_id,
        workspace_id=execution.workspace_id,
        suspension_id=suspension_id,
        decision=resolution.summary if answer.decisions is None else None,
        decisions=answer.decisions,
        interrupt_id=answer.interrupt_id,
        reviewer_notes=answer.reviewer_notes,
        reviewer=reviewer.label if reviewer else None,
        approvers=[a.reviewer for a in outcome.approvals] or None,
        discounted_approvers=outcome.discounted or None,
        claimed=True,  # the caller takes the claim; a decision that loses it is never published
    )
