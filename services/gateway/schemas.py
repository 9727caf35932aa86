"""The HTTP API's request and response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.gateway.problems import refusal
from shared.domain.execution import AuditEntry, ExecutionStatus
from shared.events import ActionDecision, AgentInput, BusyThreadPolicy, ChatMessage, Identifier
from shared.graph_input import InputError, graph_state
from shared.views import ApprovalView, DecisionView, ExecutionView

__all__ = ["ApprovalView", "DecisionView", "ExecutionView"]


INPUT_TITLES = {
    "invalid-input": "Invalid input",
    "empty-messages": "No messages",
    "blank-message": "Blank message",
}


class InvokeRequest(BaseModel):
    """What to run and what it starts with: one ``message``, or a conversation (``messages``)."""

    model_config = ConfigDict(extra="forbid")

    agent: Identifier
    message: str | None = Field(
        default=None, max_length=100_000, description="The user's message; not blank."
    )
    # minItems is published, not enforced by the field: the validator below refuses an empty
    # list with a problem that says so, rather than pydantic's "List should have at least 1 item".
    messages: list[ChatMessage] | None = Field(
        default=None,
        max_length=1_000,
        description="The conversation so far, oldest first; at least one, none blank.",
        json_schema_extra={"minItems": 1},
    )
    input: dict[str, Any] | None = Field(
        default=None,
        description=(
            "The graph's input state as LangGraph takes it (``graph.invoke({...})``): any keys,"
            " ``messages`` in any of LangChain's forms (role or type, text or content blocks)."
        ),
    )
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)
    session_id: Identifier | None = Field(
        default=None,
        description=(
            "The conversation this message continues (a LangGraph thread): the agent sees the"
            " session's earlier turns. A new id starts a session. Or the ``X-Session-ID``"
            " header."
        ),
    )
    multitask_strategy: BusyThreadPolicy | None = Field(
        default=None,
        description=(
            "What a message does when its session is busy (running, or waiting for a review):"
            " ``enqueue`` (the default) runs after it, ``interrupt`` cancels it and runs on its"
            " state, ``rollback`` cancels it and runs as if it never had, ``reject`` is a 409."
        ),
    )

    @model_validator(mode="after")
    def _one_input(self) -> InvokeRequest:
        if sum(f is not None for f in (self.message, self.messages, self.input)) != 1:
            raise ValueError("give exactly one of 'message', 'messages' or 'input'")
        if self.input is not None:
            try:
                graph_state(self.input)
            except InputError as exc:
                raise refusal(exc.problem_type, INPUT_TITLES[exc.problem_type], exc.detail) from exc
        # An empty or blank input would still start an execution: the agent then acts on
        # nothing anyone asked for (a refund review of no claim).
        if self.messages == []:
            raise refusal(
                "empty-messages",
                "No messages",
                "'messages' is empty: send at least one message (or 'message' with the text)",
            )
        if self.message is not None and not self.message.strip():
            raise refusal("blank-message", "Blank message", "'message' is blank: send some text")
        blank = [i for i, m in enumerate(self.messages or []) if not m.content.strip()]
        if blank:
            raise refusal(
                "blank-message",
                "Blank message",
                f"'messages[{blank[0]}].content' is blank: every message needs some text",
            )
        return self

    def agent_input(self) -> AgentInput:
        if self.input is not None:
            return AgentInput(state=graph_state(self.input))
        return AgentInput(message=self.message, messages=self.messages)


class InvokeAccepted(BaseModel):
    execution_id: str
    status: ExecutionStatus
    agent: str
    links: dict[str, str]
    session_id: str | None = None
    """The session the execution is a turn of (also the ``X-Session-ID`` response header)."""
    turn: int | None = None


class SessionTurn(BaseModel):
    turn: int
    execution_id: str
    status: ExecutionStatus
    created_at: datetime


class SessionView(BaseModel):
    """A session (a LangGraph thread) and its turns, newest first."""

    session_id: str
    created_at: datetime
    metadata: dict[str, Any]
    turns: list[SessionTurn]


class ResumeRequest(BaseModel):
    """The resume body, flat. The Atlas form, ``{"decision": "approve", "reviewer_notes":
    "..."}``; LangChain's decision list for action suspensions, ``{"decisions": [{"type":
    "approve"}, {"type": "edit", "edited_action": {...}}, ...]}``, one per pending action in
    order; or LangGraph's ``{"resume": <any JSON>}``, which the interrupt returns as sent
    (``reviewer_notes`` stay beside it in the record). ``interrupt_id`` names the interrupt
    answered when several are pending; ``generation`` (the execution's current one) guards
    against answering a suspension that has moved on. Nesting under ``human_review`` is rejected
    with 400."""

    model_config = ConfigDict(extra="forbid")

    decision: str | None = Field(default=None, min_length=1, max_length=256)
    decisions: list[ActionDecision] | None = Field(default=None, min_length=1, max_length=1_000)
    resume: Any = None  # parsed from JSON, so JSON already; Any keeps the schema inline
    """LangGraph's form, as ``Command(resume=...)``: the value the pending ``interrupt()``
    returns, exactly as sent (any JSON but null), or an object keyed by interrupt ids that
    answers several at once (the others stay pending). Checked against what the interrupt
    declares: its ``allowed_decisions`` (then it takes a word), the tool calls it reviews (then
    ``{"decisions": [...]}``), or its ``answer_schema``."""
    interrupt_id: str | None = Field(default=None, min_length=1, max_length=256)
    generation: int | None = Field(default=None, ge=1)
    reviewer_notes: str | None = Field(default=None, max_length=10_000)

    @model_validator(mode="after")
    def _one_form(self) -> ResumeRequest:
        forms = [f for f in (self.decision, self.decisions, self.resume) if f is not None]
        if not forms:
            raise ValueError(
                "'decision' is required (or 'decisions', one per pending action, in order, or"
                " 'resume', the value the interrupt returns)"
            )
        if len(forms) > 1:
            raise ValueError("send one of 'decision', 'decisions' or 'resume', not several")
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


class ExecutionPage(BaseModel):
    items: list[ExecutionView]
    next_cursor: str | None


class AgentView(BaseModel):
    name: str
    description: str
    load_error: str | None = None
    """Why the sandboxes cannot load this agent (its new executions fail with it, its
    suspensions wait for a release that loads it); absent when they load it or have not said."""


class AgentList(BaseModel):
    items: list[AgentView]


class AuditTrail(BaseModel):
    """Every status change and rejected or parked decision (``items``), and every decision
    taken with its reviewer, notes, action decisions, edit diffs and what it asked of the graph
    besides (``command``) (``decisions``)."""

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
