"""The HTTP API's request and response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.domain.decisions import reviews_of
from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.events import ActionDecision, AgentInput, ChatMessage, Identifier, InterruptReview
from shared.store.approvals import Approval


class InvokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: Identifier
    message: str | None = Field(default=None, max_length=100_000)
    messages: list[ChatMessage] | None = Field(default=None, max_length=1_000)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _one_input(self) -> InvokeRequest:
        if (self.message is None) == (self.messages is None):
            raise ValueError("give exactly one of 'message' or 'messages'")
        return self

    def agent_input(self) -> AgentInput:
        return AgentInput(message=self.message, messages=self.messages)


class InvokeAccepted(BaseModel):
    execution_id: str
    status: ExecutionStatus
    agent: str
    links: dict[str, str]


class ResumeRequest(BaseModel):
    """The resume body, flat. Either the Atlas form, ``{"decision": "approve",
    "reviewer_notes": "..."}``, or LangChain's decision list for action suspensions,
    ``{"decisions": [{"type": "approve"}, {"type": "edit", "edited_action": {...}}, ...]}``, one
    per pending action in order. ``interrupt_id`` names the interrupt answered when several are
    pending; ``generation`` (the execution's current one) guards against answering a suspension
    that has moved on. Nesting under ``human_review`` is rejected with 400."""

    model_config = ConfigDict(extra="forbid")

    decision: str | None = Field(default=None, min_length=1, max_length=256)
    decisions: list[ActionDecision] | None = Field(default=None, min_length=1, max_length=1_000)
    interrupt_id: str | None = Field(default=None, min_length=1, max_length=256)
    generation: int | None = Field(default=None, ge=1)
    reviewer_notes: str | None = Field(default=None, max_length=10_000)

    @model_validator(mode="after")
    def _one_form(self) -> ResumeRequest:
        if self.decision is None and self.decisions is None:
            raise ValueError(
                "'decision' is required (or 'decisions', one per pending action, in order)"
            )
        if self.decision is not None and self.decisions is not None:
            raise ValueError("send either 'decision' or 'decisions', not both")
        return self


class ResumeAccepted(BaseModel):
    execution_id: str
    suspension_id: int
    generation: int
    decision: str
    """The decision word, or the action decisions' types in order."""
    interrupt_id: str | None = None
    status: Literal["accepted", "awaiting_approvals"] = "accepted"
    """``awaiting_approvals``: this owner's approval is recorded; the agent requires more."""
    approvals: list[str] = Field(default_factory=list)
    """The owners who gave this answer so far and still count (when several are required)."""
    approvals_required: int = 1
    discounted_approvals: list[str] = Field(default_factory=list)
    """Approvals of this answer that no longer count, each with why (a key revoked since)."""


class ApprovalView(BaseModel):
    """One owner's approval toward a decision that needs several."""

    reviewer: str
    decision: str
    reviewer_notes: str | None
    at: datetime
    via_link: bool = False
    """Given through a notification link (the reviewer names the link and its recipient)."""

    @classmethod
    def of(cls, approval: Approval) -> ApprovalView:
        return cls(
            reviewer=approval.reviewer,
            via_link=approval.via_link,
            decision=approval.summary,
            reviewer_notes=approval.reviewer_notes,
            at=approval.at,
        )


class DecisionView(BaseModel):
    suspension_id: int
    decision: str
    reviewer_notes: str | None
    reviewer: str | None
    decided_at: datetime
    decisions: list[ActionDecision] | None = None
    interrupt_id: str | None = None
    edits: list[dict[str, Any]] = Field(default_factory=list)
    approvers: list[str] | None = None
    discounted_approvers: list[str] | None = None
    """Approvals given but not counted when the quorum completed, each with why."""


class ExecutionView(BaseModel):
    execution_id: str
    project_id: str
    workspace_id: str
    agent: str
    status: ExecutionStatus
    input: AgentInput
    created_at: datetime
    updated_at: datetime
    suspend_context: dict[str, Any] | None = None
    allowed_decisions: list[str] | None = None
    suspension_id: int | None = None
    generation: int | None = None
    """The current suspension's number: send it back as ``generation`` on resume."""
    reviews: list[InterruptReview] | None = None
    """What each pending interrupt asks: one decision, or a decision per action."""
    suspended_at: datetime | None = None
    result: Any = None
    error: dict[str, str] | None = None
    decisions: list[DecisionView] = Field(default_factory=list)
    approvals: list[ApprovalView] = Field(default_factory=list)
    """Approvals so far toward the current suspension's decision, when it needs several."""

    @classmethod
    def of(cls, execution: Execution) -> ExecutionView:
        view = cls(
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
            agent=execution.agent,
            status=execution.status,
            input=execution.input,
            created_at=execution.created_at,
            updated_at=execution.updated_at,
            decisions=[
                DecisionView(**d.model_dump(exclude={"decision_id", "values"}))
                for d in execution.decisions
            ],
        )
        suspension = execution.suspension
        if execution.status is ExecutionStatus.SUSPENDED and suspension is not None:
            view.suspend_context = suspension.suspend_context
            view.allowed_decisions = suspension.allowed_decisions
            view.suspension_id = suspension.suspension_id
            view.generation = suspension.suspension_id
            view.reviews = reviews_of(execution)
            view.suspended_at = suspension.suspended_at
        if execution.status is ExecutionStatus.COMPLETED:
            view.result = execution.result
        if execution.status is ExecutionStatus.ERROR:
            view.error = execution.error
        return view


class ExecutionPage(BaseModel):
    items: list[ExecutionView]
    next_cursor: str | None


class AgentView(BaseModel):
    name: str
    description: str


class AgentList(BaseModel):
    items: list[AgentView]


class AuditTrail(BaseModel):
    """Every status change and rejected or parked decision (``items``), and every decision
    taken with its reviewer, notes, action decisions and edit diffs (``decisions``)."""

    execution_id: str
    items: list[AuditEntry]
    decisions: list[DecisionView] = Field(default_factory=list)
    approvals: list[ApprovalView] = Field(default_factory=list)
    """Partial approvals toward the current suspension's decision."""


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=10_000)


class CancelAccepted(BaseModel):
    execution_id: str
    status: Literal["accepted"] = "accepted"
    """The orchestrator cancels it next; read the execution to see ``cancelled``."""
