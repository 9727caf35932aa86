"""How an execution looks from outside: the API's body of an execution, also carried to the
gateways' live streams on the ``execution.activity`` topic (the orchestrator builds it once per
change, so no gateway reads the store to show it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from shared.domain.decisions import reviews_of
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import ActionDecision, AgentInput, InterruptReview, ResumeCommand
from shared.store.approvals import Approval


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
    resume: Any = None
    """The value sent (LangGraph's form, ``{"resume": ...}``), as the interrupt received it."""
    command: ResumeCommand | None = None
    """What the answer asked of the graph besides (``goto``, ``update``, or ``end``)."""
    interrupt_id: str | None = None
    edits: list[dict[str, Any]] = Field(default_factory=list)
    approvers: list[str] | None = None
    discounted_approvers: list[str] | None = None
    """Approvals given but not counted when the quorum completed, each with why."""


ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
MAX_CONVERSATION = 200
"""At most this many messages of a conversation are shown beside a review (the latest)."""


class ConversationLine(BaseModel):
    role: str
    content: str


def conversation_of(execution: Execution) -> list[ConversationLine] | None:
    """The conversation a later turn of a session waits in, as its state held it when it
    suspended: every turn's messages so far, as role and text (None for a first turn, or a
    state without messages). A reviewer of turn 3 sees what turns 1 and 2 said."""
    turn = execution.input.turn
    suspension = execution.suspension
    if turn is None or turn.turn == 1 or suspension is None or suspension.values is None:
        return None
    messages = suspension.values.get("messages")
    if not isinstance(messages, list):
        return None
    lines = []
    for message in messages[-MAX_CONVERSATION:]:
        if not isinstance(message, dict):
            continue
        role = message.get("role") or ROLES.get(str(message.get("type")), str(message.get("type")))
        content = message.get("content")
        text = content if isinstance(content, str) else _text_of(content)
        if text:
            lines.append(ConversationLine(role=str(role), content=text))
    return lines


def _text_of(content: Any) -> str:
    """The text of LangChain content blocks (``[{"type": "text", "text": ...}]``)."""
    if not isinstance(content, list):
        return ""
    return " ".join(
        str(block.get("text", "")) for block in content if isinstance(block, dict)
    ).strip()


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
    session_id: str | None = None
    """The session (LangGraph thread) this execution is a turn of."""
    turn: int | None = None
    conversation: list[ConversationLine] | None = None
    """While a later turn of a session waits for a review: the session's messages so far."""

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
            session_id=execution.input.turn.thread_id if execution.input.turn else None,
            turn=execution.input.turn.turn if execution.input.turn else None,
        )
        suspension = execution.suspension
        if execution.status is ExecutionStatus.SUSPENDED and suspension is not None:
            view.suspend_context = suspension.suspend_context
            view.allowed_decisions = suspension.allowed_decisions
            view.suspension_id = suspension.suspension_id
            view.generation = suspension.suspension_id
            view.reviews = reviews_of(execution)
            view.suspended_at = suspension.suspended_at
            view.conversation = conversation_of(execution)
        if execution.status is ExecutionStatus.COMPLETED:
            view.result = execution.result
        if execution.status is ExecutionStatus.ERROR:
            view.error = execution.error
        return view
