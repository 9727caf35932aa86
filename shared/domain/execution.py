"""The stored execution: statuses, the current suspension, decisions and the audit trail.

Pure data. The rules that move an execution between statuses live in the orchestrator's state
machine; the gateway only reads these documents (and creates the first, ``pending`` one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.deadlines import Deadlines
from shared.events import (
    ActionDecision,
    AgentInput,
    ExecutionRequested,
    ExecutionStatus,
    InterruptReview,
    PendingInterrupt,
    ResumeCommand,
    ToolRule,
    utc_now,
)

__all__ = [
    "AuditEntry",
    "Decision",
    "Execution",
    "ExecutionStatus",
    "RunWebhook",
    "Suspension",
    "next_deadline",
]

SCHEMA_VERSION = 1


class Suspension(BaseModel):
    """Why and where an execution waits for a reviewer."""

    model_config = ConfigDict(frozen=True)

    suspension_id: int
    """Equal to the epoch of the attempt that suspended: unique within the execution."""
    suspend_context: dict[str, Any]
    allowed_decisions: list[str]
    interrupt_ids: list[str]
    suspended_at: datetime
    agent_fingerprint: str | None = None
    reviews: list[InterruptReview] = Field(default_factory=list)
    tools: dict[str, ToolRule] = Field(default_factory=dict)
    deadlines: Deadlines | None = None
    """When to remind, escalate and expire, as absolute times (shared/domain/deadlines.py)."""
    interrupts: list[PendingInterrupt] = Field(default_factory=list)
    """The interrupts' raw values, in the order the graph reported them (``suspend_context`` is
    the reviewers' view of them). Empty for suspensions stored before it was recorded."""
    values: dict[str, Any] | None = None
    """The graph's state values when it suspended, as JSON; None when the sandbox did not send
    them (too large, not an object) or for suspensions stored before they were recorded."""
    next: list[str] = Field(default_factory=list)
    """The nodes that run when the graph resumes, as LangGraph's thread state shows them."""


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision_id: str
    suspension_id: int
    decision: str
    """The answer in one line: the word, or the action decisions' types in order."""
    reviewer_notes: str | None = None
    reviewer: str | None = None
    decided_at: datetime = Field(default_factory=utc_now)
    decisions: list[ActionDecision] | None = None
    """The action decisions as submitted (LangChain's form)."""
    resume: Any = None
    """The value as submitted (LangGraph's form), kept beside who gave it and the notes."""
    interrupt_id: str | None = None
    values: dict[str, Any] | None = None
    """What each answered interrupt resumes with (absent: the Atlas shape for all)."""
    edits: list[dict[str, Any]] = Field(default_factory=list)
    """For each edit: the action's position, its name and args before and after."""
    command: ResumeCommand | None = None
    """What the answer asked of the graph besides (``goto``, ``update``, ``end``)."""
    approvers: list[str] | None = None
    """The owners whose identical approvals made this decision (separation of duties)."""
    discounted_approvers: list[str] | None = None
    """Approvals given but not counted when the quorum completed, each with why."""
    webhook: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """Where to tell that the run this decision resumes has ended (``Execution.webhooks``)."""


class RunWebhook(BaseModel):
    """Where to tell that one run of the execution ended (LangGraph's ``webhook`` of a run):
    the run that ``epoch`` dispatched, the URL its request gave, and when it was asked for."""

    model_config = ConfigDict(frozen=True)

    epoch: int = Field(ge=1)
    url: str
    requested_at: datetime = Field(default_factory=utc_now)


class AuditEntry(BaseModel):
    """One line of an execution's history: who did what, when and why."""

    model_config = ConfigDict(frozen=True)

    at: datetime = Field(default_factory=utc_now)
    actor: str
    action: str
    """``transition`` for a status change, otherwise e.g. ``decision.rejected``."""
    from_status: ExecutionStatus | None = None
    to_status: ExecutionStatus | None = None
    reason: str | None = None
    event_id: str | None = None


class Execution(BaseModel):
    model_config = ConfigDict(frozen=True)

    schema_version: int = SCHEMA_VERSION
    execution_id: str
    project_id: str
    workspace_id: str
    agent: str
    input: AgentInput
    idempotency_key: str | None = None
    request_fingerprint: str | None = None
    requested_by: str | None = None
    requester_identity: str | None = None
    """Who asked, for separation of duties (shared/domain/principals.py); None for executions
    stored before it was recorded, or requested by an outside producer without one."""
    status: ExecutionStatus = ExecutionStatus.PENDING
    version: int = 1
    """Bumped by every stored change; the compare-and-set condition."""
    epoch: int = 0
    """Number of the latest dispatch to the sandbox; 0 until first dispatched."""
    suspension: Suspension | None = None
    decisions: list[Decision] = Field(default_factory=list)
    parked_decision: Decision | None = None
    """A decision that arrived (with its suspension_id) before the suspension it answers was
    recorded: outside systems react to ``execution.suspended`` as fast as the orchestrator does.
    Applied, or rejected, when that suspension is recorded."""
    result: Any = None
    error: dict[str, str] | None = None
    audit: list[AuditEntry] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)
    undelivered_since: datetime | None = None
    """Set when the gateway could not get the request onto the bus (its client was told 503),
    cleared when a retry delivers it. A request left undelivered is abandoned by the
    orchestrator after a while (status ``error``), so nothing stays pending forever."""
    stopped_values: dict[str, Any] | None = None
    """The graph's state where a cancel found it waiting for a review (the suspension it clears
    held it): what a later turn starts from, and what the thread's history shows of this one."""
    trace_context: dict[str, str] | None = None
    """The W3C trace context of the request that created the execution: every later run
    segment (a resume days later has a trace of its own) links back to it."""
    webhooks: list[RunWebhook] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The runs whose end is to be told to a URL (shared/domain/runs.py ``webhooks_due``); left
    out of the stored document when none asked, as nearly every execution."""

    @property
    def last_decision(self) -> Decision | None:
        return self.decisions[-1] if self.decisions else None


def new_pending_execution(
    event: ExecutionRequested,
    fingerprint: str | None,
    trace_context: dict[str, str] | None = None,
) -> Execution:
    """The first stored form of an execution, from the request that starts it."""
    created = AuditEntry(
        actor=event.requested_by or "producer",
        action="created",
        to_status=ExecutionStatus.PENDING,
        reason=f"invoke of agent {event.agent}",
        event_id=event.event_id,
    )
    return Execution(
        execution_id=event.execution_id,
        project_id=event.project_id,
        workspace_id=event.workspace_id,
        agent=event.agent,
        input=event.input,
        idempotency_key=event.idempotency_key,
        request_fingerprint=fingerprint,
        requested_by=event.requested_by,
        requester_identity=event.requester_identity,
        audit=[created],
        trace_context=trace_context,
    )


def request_of(execution: Execution) -> ExecutionRequested:
    """The request that created ``execution``, as stored: what the orchestrator applies when it
    starts a turn that waited for the one before (nothing is published again)."""
    return ExecutionRequested(
        event_id=f"{execution.execution_id}:requested",
        execution_id=execution.execution_id,
        correlation_id=execution.execution_id,
        project_id=execution.project_id,
        workspace_id=execution.workspace_id,
        agent=execution.agent,
        input=execution.input,
        idempotency_key=execution.idempotency_key,
        requested_by=execution.requested_by,
        requester_identity=execution.requester_identity,
    )


def next_deadline(execution: Execution) -> datetime | None:
    """When the suspension the execution waits in next has a deadline to fire (None when it
    does not wait, or has nothing left to fire): what every store's deadline query keys on."""
    suspension = execution.suspension
    if execution.status is not ExecutionStatus.SUSPENDED or suspension is None:
        return None
    return suspension.deadlines.next_at() if suspension.deadlines else None


def undelivered(executions: list[Execution], cutoff: datetime, limit: int) -> list[Execution]:
    """The store query ``undelivered_before`` over executions at hand (the stores that filter in
    Python use it, so they agree)."""
    found = [
        e
        for e in executions
        if e.status is ExecutionStatus.PENDING
        and e.epoch == 0
        and e.undelivered_since is not None
        and e.undelivered_since <= cutoff
    ]
    return sorted(found, key=lambda e: (e.undelivered_since, e.execution_id))[:limit]
