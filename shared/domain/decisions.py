"""Decision validation: may this decision resume this execution now? Pure, no I/O.

The gateway runs it to answer a reviewer synchronously (400 / 409); the orchestrator runs it again
on every ``decision.submitted`` event, because outside producers publish there directly.
"""

from __future__ import annotations

from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.versions import AgentVersion
from shared.errors import InterlockError


class DecisionError(InterlockError):
    """The decision cannot be applied; never retryable."""

    reason_code = "decision-invalid"


class NotSuspended(DecisionError):
    reason_code = "not-suspended"

    def __init__(self, status: ExecutionStatus) -> None:
        super().__init__(f"execution is {status.value}, not suspended; nothing to decide")
        self.status = status


class StaleSuspension(DecisionError):
    reason_code = "stale-suspension"

    def __init__(self, given: int, current: int) -> None:
        super().__init__(
            f"decision answers suspension {given}, but the execution now waits on suspension"
            f" {current}"
        )


class DecisionNotAllowed(DecisionError):
    reason_code = "decision-not-allowed"

    def __init__(self, decision: str, allowed: list[str]) -> None:
        super().__init__(
            f"decision {decision!r} is not allowed here; allowed decisions: {', '.join(allowed)}"
        )
        self.allowed = allowed


class AgentVersionChanged(DecisionError):
    reason_code = "agent-version-changed"

    def __init__(self, suspended_with: str, current: str) -> None:
        super().__init__(
            f"the execution suspended under agent version {suspended_with}, but the sandboxes now"
            f" run version {current}; resuming would replay the checkpoint with different code."
            f" Revert the agent, or declare {suspended_with} in its compatible_with"
        )
        self.suspended_with = suspended_with
        self.current = current


def check_agent_version(execution: Execution, current: AgentVersion | None) -> None:
    """Refuse to resume a suspension taken under agent code that the sandboxes no longer run."""
    suspension = execution.suspension
    if current is None or suspension is None or current.accepts(suspension.agent_fingerprint):
        return
    assert suspension.agent_fingerprint is not None  # accepts() is True for None
    raise AgentVersionChanged(suspension.agent_fingerprint, current.fingerprint)


def canonical_decision(execution: Execution, decision: str, suspension_id: int | None) -> str:
    """Return the decision spelled as the agent declared it, or raise why it cannot apply.

    Matching ignores case and surrounding blanks (the Atlas contract). With no
    ``allowed_decisions`` declared, any non-empty decision is accepted as given.
    """
    suspension = execution.suspension
    if execution.status is not ExecutionStatus.SUSPENDED or suspension is None:
        raise NotSuspended(execution.status)
    if suspension_id is not None and suspension_id != suspension.suspension_id:
        raise StaleSuspension(suspension_id, suspension.suspension_id)
    wanted = decision.strip()
    if not suspension.allowed_decisions:
        return wanted
    for allowed in suspension.allowed_decisions:
        if allowed.casefold() == wanted.casefold():
            return allowed
    raise DecisionNotAllowed(decision, suspension.allowed_decisions)
