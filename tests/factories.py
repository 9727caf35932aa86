"""Builders for domain objects in tests."""

from __future__ import annotations

from pathlib import Path

from shared import senders
from shared.domain.execution import Execution, ExecutionStatus, Suspension, new_pending_execution
from shared.events import (
    AgentInput,
    DecisionSubmitted,
    ExecutionReported,
    ExecutionRequested,
    ExecutionSuspended,
    PendingInterrupt,
    ReportOutcome,
    utc_now,
)
from shared.senders import DEVELOPMENT_KEY_ID, GatewaySender, MessageSigner

SCOPE = {"project_id": "proj-1", "workspace_id": "ws-1"}
GATEWAY = GatewaySender(DEVELOPMENT_KEY_ID)
"""The sender of what the gateway published (its decisions are signed; see shared/senders.py)."""


def gateway_signer() -> MessageSigner:
    """The development gateway key every process trusts outside production."""
    return senders.gateway_signer(None, environment="development")


def requested(execution_id: str = "exec-1", agent: str = "refund-approval") -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=execution_id, agent=agent, input=AgentInput(message="refund CLM-4821"), **SCOPE
    )


def pending(execution_id: str = "exec-1") -> Execution:
    return new_pending_execution(requested(execution_id), None)


def suspended_event(
    execution: Execution, *, allowed: list[str] | None = None
) -> ExecutionSuspended:
    allowed = ["approve", "reject"] if allowed is None else allowed
    return ExecutionSuspended(
        execution_id=execution.execution_id,
        agent=execution.agent,
        epoch=execution.epoch,
        suspension_id=execution.epoch,
        suspend_context={"claim_id": "CLM-4821", "allowed_decisions": allowed},
        allowed_decisions=allowed,
        interrupts=[
            PendingInterrupt(interrupt_id=f"int-{execution.epoch}", value={"claim_id": "CLM-4821"})
        ],
        **SCOPE,
    )


def report(execution: Execution, outcome: ReportOutcome, **extra: object) -> ExecutionReported:
    return ExecutionReported(
        execution_id=execution.execution_id,
        epoch=execution.epoch,
        outcome=outcome,
        **SCOPE,
        **extra,  # type: ignore[arg-type]
    )


def decision(execution: Execution, value: str = "approve", **extra: object) -> DecisionSubmitted:
    return DecisionSubmitted(execution_id=execution.execution_id, decision=value, **SCOPE, **extra)  # type: ignore[arg-type]


def suspended(execution_id: str = "exec-1", allowed: list[str] | None = None) -> Execution:
    allowed = ["approve", "reject"] if allowed is None else allowed
    return pending(execution_id).model_copy(
        update={
            "status": ExecutionStatus.SUSPENDED,
            "epoch": 1,
            "suspension": Suspension(
                suspension_id=1,
                suspend_context={"claim_id": "CLM-4821"},
                allowed_decisions=allowed,
                interrupt_ids=["int-1"],
                suspended_at=utc_now(),
            ),
        }
    )


def outside_producer(
    folder: Path,
    *,
    name: str = "billing-bot",
    role: str = "PROJECT_OWNER",
    projects: tuple[str, ...] = ("demo",),
) -> tuple[Path, MessageSigner]:
    """A producers file registering one outside producer, and that producer's signer (what
    ``interlock keys producer-key`` gives an operator)."""
    private, public = senders.new_key_pair()
    path = folder / f"producers-{name}.toml"
    listed = ", ".join(f'"{p}"' for p in projects)
    path.write_text(
        f'[producers.{name}]\npublic_key = "{public}"\nrole = "{role}"\nprojects = [{listed}]\n'
    )
    return path, MessageSigner.for_producer(name, private)
