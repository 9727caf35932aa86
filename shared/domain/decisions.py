"""Decision validation: may this decision resume this execution now? Pure, no I/O.

The gateway runs it to answer a reviewer synchronously (400 / 409); the orchestrator runs it again
on every ``decision.submitted`` event, because outside producers publish there directly.
"""

from __future__ import annotations

from typing import Any

from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.review import DecisionNotInList, Resolution, ReviewError, resolve
from shared.domain.versions import AgentVersion
from shared.errors import InterlockError
from shared.events import ActionDecision, InterruptReview, ResumeCommand


class DecisionError(InterlockError):
    """The decision cannot be applied; never retryable."""

    reason_code = "decision-invalid"
    problem_type = "invalid-decision"
    problem_title = "Invalid decision"
    problem_status = 400


class NotSuspended(DecisionError):
    reason_code = "not-suspended"
    problem_type = "not-suspended"
    problem_title = "Execution is not suspended"
    problem_status = 409

    def __init__(self, status: ExecutionStatus) -> None:
        super().__init__(f"execution is {status.value}, not suspended; nothing to decide")
        self.status = status
        self.winner: dict[str, Any] | None = None
        """The decision that took the suspension the answer named, when it is known."""

    def problem_extensions(self) -> dict[str, Any]:
        return {"winning_decision": self.winner} if self.winner is not None else {}


class StaleSuspension(DecisionError):
    reason_code = "stale-suspension"
    problem_type = "stale-generation"  # the API calls a suspension's id its generation
    problem_title = "Stale generation"
    problem_status = 409

    def __init__(self, given: int, current: int) -> None:
        super().__init__(
            f"decision answers suspension {given}, but the execution now waits on suspension"
            f" {current}"
        )


class DecisionNotAllowed(DecisionError):
    reason_code = "decision-not-allowed"
    problem_type = "decision-not-allowed"
    problem_title = "Decision not allowed"

    def __init__(self, decision: str, allowed: list[str]) -> None:
        super().__init__(
            f"decision {decision!r} is not allowed here; allowed decisions: {', '.join(allowed)}"
        )
        self.allowed = allowed

    def problem_extensions(self) -> dict[str, Any]:
        return {"allowed_decisions": self.allowed}


class InvalidDecision(DecisionError):
    """The answer does not fit what the suspension asks (count, type, edit, message)."""

    reason_code = "invalid-decision"


class AgentVersionChanged(DecisionError):
    reason_code = "agent-version-changed"
    problem_type = "agent-version-changed"
    problem_title = "Agent code changed since the suspension"
    problem_status = 409

    def __init__(self, suspended_with: str, current: str) -> None:
        super().__init__(
            f"the execution suspended under agent version {suspended_with}, but the sandboxes now"
            f" run version {current}; resuming would replay the checkpoint with different code."
            f" Revert the agent, or declare {suspended_with} in its compatible_with"
        )
        self.suspended_with = suspended_with
        self.current = current

    def problem_extensions(self) -> dict[str, Any]:
        return {"suspended_with": self.suspended_with, "current": self.current}


def check_agent_version(execution: Execution, current: AgentVersion | None) -> None:
    """Refuse to resume a suspension taken under agent code that the sandboxes no longer run."""
    suspension = execution.suspension
    if current is None or suspension is None or current.accepts(suspension.agent_fingerprint):
        return
    assert suspension.agent_fingerprint is not None  # accepts() is True for None
    raise AgentVersionChanged(suspension.agent_fingerprint, current.fingerprint)


def reviews_of(execution: Execution) -> list[InterruptReview]:
    """What the pending suspension asks. Suspensions recorded before reviews existed ask one
    Atlas decision per interrupt."""
    suspension = execution.suspension
    assert suspension is not None
    if suspension.reviews:
        return list(suspension.reviews)
    return [
        InterruptReview(
            interrupt_id=interrupt_id,
            kind="decision",
            allowed_decisions=suspension.allowed_decisions,
        )
        for interrupt_id in suspension.interrupt_ids
    ]


def resolve_decision(
    execution: Execution,
    *,
    decision: str | None,
    decisions: list[ActionDecision] | None,
    reviewer_notes: str | None,
    interrupt_id: str | None,
    suspension_id: int | None,
    resume: Any = None,
    command: ResumeCommand | None = None,
) -> Resolution:
    """Check a reviewer's answer against the execution's pending suspension (``resume``:
    LangGraph's form, see shared/domain/review.py).

    Raises NotSuspended, StaleSuspension (the answer names another generation),
    DecisionNotAllowed (a word outside ``allowed_decisions``) or InvalidDecision (any other
    mismatch, with the exact reason).
    """
    suspension = execution.suspension
    if execution.status is not ExecutionStatus.SUSPENDED or suspension is None:
        raise NotSuspended(execution.status)
    if suspension_id is not None and suspension_id != suspension.suspension_id:
        raise StaleSuspension(suspension_id, suspension.suspension_id)
    try:
        return resolve(
            reviews_of(execution),
            decision=decision,
            decisions=decisions,
            reviewer_notes=reviewer_notes,
            interrupt_id=interrupt_id,
            tools=suspension.tools,
            resume=resume,
            command=command,
        )
    except DecisionNotInList as exc:
        raise DecisionNotAllowed(exc.decision, exc.allowed) from exc
    except ReviewError as exc:
        raise InvalidDecision(str(exc)) from exc


def canonical_decision(execution: Execution, decision: str, suspension_id: int | None) -> str:
    """The Atlas form alone: the decision spelled as the agent declared it (matching ignores
    case and surrounding blanks), or the reason it cannot apply."""
    resolution = resolve_decision(
        execution,
        decision=decision,
        decisions=None,
        reviewer_notes=None,
        interrupt_id=None,
        suspension_id=suspension_id,
    )
    return resolution.summary
