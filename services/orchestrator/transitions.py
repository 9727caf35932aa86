"""What a transition is: the statuses an execution may move between, and the outcome of applying
an event (the execution to store next, the transitions made, or why nothing changed). Pure, no
I/O; the state machine (services/orchestrator/state_machine.py) says which event makes which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.errors import InterlockError

S = ExecutionStatus

ALLOWED_TRANSITIONS: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.ERROR, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUSPENDED, S.COMPLETED, S.ERROR, S.CANCELLED}),
    S.SUSPENDED: frozenset({S.RESUMING, S.CANCELLED, S.EXPIRED}),
    S.RESUMING: frozenset({S.RUNNING, S.ERROR, S.SUSPENDED, S.CANCELLED}),
    S.COMPLETED: frozenset(),
    S.ERROR: frozenset(),
    S.CANCELLED: frozenset(),
    S.EXPIRED: frozenset(),
}


class IllegalTransition(InterlockError):
    def __init__(self, current: ExecutionStatus, target: ExecutionStatus) -> None:
        super().__init__(f"no transition from {current.value} to {target.value}")


@dataclass(frozen=True)
class Transition:
    from_status: ExecutionStatus
    to_status: ExecutionStatus
    sequence: int
    """Position of ``to_status`` in the execution's status history (1 is pending)."""
    reason: str | None


def status_sequence(execution: Execution) -> int:
    """How many statuses the execution has had: pending plus one per transition."""
    return 1 + sum(1 for entry in execution.audit if entry.action == "transition")


@dataclass(frozen=True)
class Outcome:
    execution: Execution
    transitions: list[Transition] = field(default_factory=list)
    ignored: str | None = None
    """Why the event changed nothing (duplicate, stale), for the log line."""
    claim: int | None = None
    """The suspension whose one decision this outcome takes (the caller claims it first)."""

    @property
    def changed(self) -> bool:
        return bool(self.transitions) or self.ignored is None


def transition(
    execution: Execution,
    target: ExecutionStatus,
    *,
    actor: str,
    reason: str | None = None,
    event_id: str | None = None,
    **changes: object,
) -> Execution:
    """Move to ``target`` with one audit entry, or raise IllegalTransition. (Versions are the
    store's: it numbers what it stores.)"""
    if target not in ALLOWED_TRANSITIONS[execution.status]:
        raise IllegalTransition(execution.status, target)
    entry = AuditEntry(
        actor=actor,
        action="transition",
        from_status=execution.status,
        to_status=target,
        reason=reason,
        event_id=event_id,
    )
    return execution.model_copy(
        update={
            **changes,
            "status": target,
            "audit": [*execution.audit, entry],
            "updated_at": entry.at,
        }
    )


def with_audit(execution: Execution, entry: AuditEntry) -> Execution:
    """Record something that is not a status change (a rejected decision, say)."""
    return execution.model_copy(
        update={
            "audit": [*execution.audit, entry],
            "updated_at": entry.at,
        }
    )


class Walk:
    """Applies a chain of transitions and remembers them for the outcome."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.transitions: list[Transition] = []

    def to(self, target: ExecutionStatus, **kwargs: object) -> None:
        before = self.execution.status
        reason = kwargs.get("reason")
        self.execution = transition(self.execution, target, **kwargs)  # type: ignore[arg-type]
        self.transitions.append(
            Transition(
                before,
                target,
                status_sequence(self.execution),
                reason if isinstance(reason, str) else None,
            )
        )

    def outcome(self) -> Outcome:
        return Outcome(self.execution, self.transitions)
