"""Versioned event schemas: the wire contract between the services and with outside systems.

Every message on every topic is one of these frozen models, serialised as JSON and keyed by
``execution_id``. The envelope fields (``event_id``, ``type``, ``version``, ``occurred_at``,
``execution_id``, ``causation_id``, ``correlation_id``) are common to all of them. A breaking
change adds a new model with ``version=2`` that consumers accept before producers switch; the
golden fixtures in ``tests/fixtures/events`` pin every published version.

This module imports only pydantic and the standard library on purpose: outside producers and
every service depend on it.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    model_validator,
)

JsonObject = dict[str, Any]
Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
]
"""Project, workspace, agent and execution identifiers: URL- and key-safe, bounded."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


class ExecutionStatus(StrEnum):
    """The statuses of an execution (the Atlas lifecycle)."""

    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    RESUMING = "resuming"
    COMPLETED = "completed"
    ERROR = "error"
    CANCELLED = "cancelled"
    """Stopped by a user; terminal."""
    EXPIRED = "expired"
    """Nobody reviewed it before its deadline (``on_expiry = "cancel"``); terminal."""

    @property
    def is_terminal(self) -> bool:
        return self in (
            ExecutionStatus.COMPLETED,
            ExecutionStatus.ERROR,
            ExecutionStatus.CANCELLED,
            ExecutionStatus.EXPIRED,
        )


class EventModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    event_id: str = Field(default_factory=new_id, min_length=1, max_length=300)
    occurred_at: AwareDatetime = Field(default_factory=utc_now)
    execution_id: Identifier
    causation_id: str | None = Field(default=None, max_length=300)
    """The event_id of the message whose handling produced this one."""
    correlation_id: str | None = Field(default=None, max_length=300)
    """Constant across one execution's whole history: Interlock uses the execution id."""


class ChatMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    role: Literal["user", "assistant", "system"] = "user"
    content: str = Field(max_length=100_000)


BusyThreadPolicy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a new run does when its thread is busy (LangGraph's ``multitask_strategy``)."""


class ThreadTurn(BaseModel):
    """Where an execution stands in a conversation (a thread): which turn it is, the turn that
    must end before it starts, and the checkpoint it starts from (shared/domain/threads.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    thread_id: Identifier
    turn: int = Field(ge=1)
    after: str | None = Field(default=None, max_length=100)
    """The execution of the turn before: this one is dispatched only once that one ended."""
    base: str | None = Field(default=None, max_length=100)
    """The execution whose checkpoint this turn starts from (None: the graph's empty state)."""
    base_checkpoint_id: str | None = Field(default=None, max_length=256)
    """A given checkpoint of ``base`` (a fork); None: its latest."""
    policy: BusyThreadPolicy = "enqueue"
    request_id: str = Field(default_factory=new_id, min_length=1, max_length=100)
    """Tells two requests of one text apart: each is a turn of its own."""
    kind: Literal["run", "update"] = "run"
    """``run``: the graph runs the input. ``update``: the input's state is written to the
    thread as a node's output (LangGraph's ``update_state``; none for a copy), nothing runs."""
    as_node: str | None = Field(default=None, max_length=256)
    """For an update: the node the values are written as (LangGraph's ``as_node``)."""


class AgentInput(BaseModel):
    """What an execution starts with: one message, a conversation, or the graph's input state
    as LangGraph takes it; on a thread, also where the conversation stands (``turn``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    message: str | None = Field(default=None, max_length=100_000)
    messages: list[ChatMessage] | None = Field(default=None, max_length=1_000)
    state: dict[str, JsonValue] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The graph's input, any keys (``graph.invoke({...})``); its ``messages`` in LangChain's
    serialized form (shared/graph_input.py)."""
    turn: ThreadTurn | None = Field(default=None, exclude_if=lambda v: v is None)
    """The turn of a thread this input is; None for a one-off execution. Left out when None, so
    one-off executions read as before."""

    @model_validator(mode="after")
    def _exactly_one(self) -> AgentInput:
        if sum(f is not None for f in (self.message, self.messages, self.state)) != 1:
            raise ValueError("give exactly one of 'message', 'messages' or 'state'")
        return self

    def as_messages(self) -> list[ChatMessage]:
        if self.messages is not None:
            return list(self.messages)
        return [ChatMessage(role="user", content=self.message or "")]

    def graph_input(self) -> dict[str, Any]:
        """What the graph is invoked with."""
        if self.state is not None:
            return dict(self.state)
        return {"messages": [m.model_dump() for m in self.as_messages()]}


class ExecutionScope(EventModel):
    project_id: Identifier
    workspace_id: Identifier


# --- reviews: what a suspension asks, what a reviewer answers -------------------------------


class ActionReview(BaseModel):
    """One tool call waiting for review."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    args: dict[str, Any]
    description: str | None = None
    allowed_decisions: list[str]
    args_schema: dict[str, Any] | None = None
    """JSON schema an edit's args must fit (the tool's own), when known."""


class InterruptReview(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    interrupt_id: str
    kind: Literal["decision", "actions", "human_interrupt"]
    """``human_interrupt``: LangGraph's ``HumanInterrupt`` (Agent Inbox's protocol), one action
    per request, whose ``allowed_decisions`` are the ``HumanResponse`` types its ``config``
    allows (accept, edit, response, ignore)."""
    mode: Literal["batched", "per_call"] | None = None
    """For action interrupts: how the agent expects the answer."""
    actions: list[ActionReview] = Field(default_factory=list)
    allowed_decisions: list[str] = Field(default_factory=list)
    """For decision interrupts: the agent's declared decisions. Empty: the interrupt declares
    none, and ``interrupt()`` returns whatever the reviewer resumes with (``resume``)."""
    answer_schema: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    """A JSON schema the interrupt's value declares (``answer_schema``) for the value it takes:
    an answer that does not fit is refused before anything is stored."""


class ToolRule(BaseModel):
    """A tool of the agent: its review policy and argument schema, for checking edits that
    rename a call to another tool."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    allowed_decisions: list[str] | None
    """None: the tool runs without review."""
    args_schema: dict[str, Any] | None = None


class EditedAction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=256)
    args: dict[str, Any]


class ActionDecision(BaseModel):
    """One decision of LangChain's list (the resume body's ``decisions`` items)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    type: Literal["approve", "edit", "reject", "respond"]
    edited_action: EditedAction | None = None
    message: str | None = Field(default=None, max_length=100_000)

    def for_agent(self) -> dict[str, Any]:
        """The decision as LangChain's middleware expects it."""
        if self.type == "edit":
            assert self.edited_action is not None
            return {"type": "edit", "edited_action": self.edited_action.model_dump()}
        if self.type in ("reject", "respond") and self.message is not None:
            return {"type": self.type, "message": self.message}
        return {"type": self.type}


class SendTo(BaseModel):
    """LangGraph's ``Send``: run ``node`` with ``input`` as its state."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    node: str = Field(min_length=1, max_length=256)
    input: JsonValue = None


class ResumeCommand(BaseModel):
    """What an answer to a review asks of the graph beside the values its interrupts return:
    LangGraph's ``Command(goto=..., update=...)`` (with or without ``resume``), or its
    ``update_state(None, as_node=END)`` (``end``: the pending interrupts are dropped and the
    run ends on the state as it stands)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    goto: list[Annotated[str, StringConstraints(min_length=1, max_length=256)] | SendTo] = Field(
        default_factory=list, max_length=100
    )
    """The nodes to run next (``Command.goto``), by name or as ``Send``."""
    update: dict[str, JsonValue] | list[tuple[str, JsonValue]] | None = None
    """Channel values written before the graph goes on (``Command.update``): an object, or
    ``[key, value]`` pairs."""
    end: bool = False

    @model_validator(mode="after")
    def _something_alone(self) -> ResumeCommand:
        if self.end and (self.goto or self.update is not None):
            raise ValueError("'end' drops the pending interrupts: it takes no goto or update")
        if not (self.end or self.goto or self.update is not None):
            raise ValueError("a command asks for a goto, an update or the end")
        return self

    def summary(self) -> str:
        """The command in a few words, for the decision's record and the audit."""
        if self.end:
            return "end (update_state as_node=__end__)"
        parts = []
        if self.goto:
            names = [g if isinstance(g, str) else f"Send({g.node})" for g in self.goto]
            parts.append(f"goto {', '.join(names)}")
        if self.update is not None:
            keys = self.update if isinstance(self.update, dict) else dict(self.update)
            parts.append(f"update {', '.join(sorted(keys)) or '(nothing)'}")
        return "; ".join(parts)


# --- inputs from the outside world (gateway or any producer) ---------------------------------


MAX_STORED_AS_CHARS = 16_384
"""The largest execution an ``execution.requested`` carries (``stored_as``): a request with a
large input would otherwise near the broker's message limit with its input twice."""


class ExecutionRequested(ExecutionScope):
    type: Literal["execution.requested"] = "execution.requested"
    version: Literal[1] = 1
    agent: Identifier
    input: AgentInput
    idempotency_key: str | None = Field(default=None, max_length=256)
    requested_by: str | None = Field(default=None, max_length=256)
    requester_identity: str | None = Field(
        default=None, max_length=300, exclude_if=lambda v: v is None
    )
    """Who asked, for separation of duties: ``person:<email>`` or ``key:<key id>`` (see
    shared/domain/principals.py). None: an outside producer, known only by ``requested_by``.
    Left out when None, so consumers of an older version read what older producers sent."""
    stored_as: str | None = Field(
        default=None, max_length=MAX_STORED_AS_CHARS, exclude_if=lambda v: v is None
    )
    """The execution as the gateway stored it (its JSON), so the orchestrator applies the
    request to it without reading it back; the compare-and-set still tells if it is not the
    newest version. Believed only from a gateway (its signature), and left out when the
    execution is large (the orchestrator then reads it) or by older gateways."""


class DecisionSubmitted(ExecutionScope):
    type: Literal["decision.submitted"] = "decision.submitted"
    version: Literal[1] = 1
    decision_id: str = Field(default_factory=new_id, min_length=1, max_length=300)
    """Identifies this decision; re-sending the same decision_id is a harmless retry. When a
    producer omits it, the event_id stands in, so a redelivered message keeps its identity."""
    suspension_id: int | None = Field(default=None, ge=1)
    """Which suspension this answers; ``None`` means the current one."""
    decision: str | None = Field(default=None, min_length=1, max_length=256)
    """The Atlas form: one decision word, e.g. ``approve``."""
    decisions: list[ActionDecision] | None = Field(default=None, max_length=1_000)
    """LangChain's form: one decision per pending action, in order."""
    resume: JsonValue | None = Field(default=None, exclude_if=lambda v: v is None)
    """LangGraph's form (``Command(resume=...)``): the value ``interrupt()`` returns, any JSON
    but null; or an object keyed by interrupt ids answering each of them."""
    command: ResumeCommand | None = Field(default=None, exclude_if=lambda v: v is None)
    """What the answer asks of the graph besides (``Command.goto`` / ``update``, or ``end``);
    with a command, the answer may leave out ``resume``: the interrupted node then runs again
    and interrupts again, as in LangGraph. Left out when None, so consumers of an older version
    read what older producers sent."""
    interrupt_id: str | None = Field(default=None, max_length=256)
    """Which pending interrupt this answers; needed when several are pending."""
    reviewer_notes: str | None = Field(default=None, max_length=10_000)
    reviewer: str | None = Field(default=None, max_length=512)
    approvers: list[str] | None = Field(default=None, max_length=10)
    """When the agent requires several owners: every owner who gave this answer."""
    discounted_approvers: list[str] | None = Field(
        default=None, max_length=100, exclude_if=lambda v: v is None
    )
    """Approvals of this answer that no longer counted when the quorum was checked, each with
    why (an API key revoked since it approved)."""
    webhook: str | None = Field(default=None, max_length=4096, exclude_if=lambda v: v is None)
    """Where to tell that the run this decision resumes has ended (LangGraph's ``webhook`` of a
    run with a ``command``). Left out when None."""
    claimed: bool = Field(default=False, exclude_if=lambda v: not v)
    """The producer took the suspension's one decision claim for this decision before
    publishing it (the gateway does), so the orchestrator need not look. Leave it unset
    otherwise: the orchestrator then takes the claim, and a decision that loses it is rejected."""

    @model_validator(mode="after")
    def _one_form(self) -> DecisionSubmitted:
        forms = sum(f is not None for f in (self.decision, self.decisions, self.resume))
        if forms != 1 and not (forms == 0 and self.command is not None):
            raise ValueError(
                "give exactly one of 'decision', 'decisions' or 'resume' (or a 'command' alone)"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _decision_id_from_event_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "decision_id" not in data and "event_id" in data:
            return {**data, "decision_id": data["event_id"]}
        return data


class CancelRequested(ExecutionScope):
    """Stop an execution. A pending or suspended one is cancelled at once; a running one too,
    and whatever its current run reports afterwards is ignored (effects already under way in
    that run may still complete)."""

    type: Literal["execution.cancel_requested"] = "execution.cancel_requested"
    version: Literal[1] = 1
    reason: str | None = Field(default=None, max_length=10_000)
    requested_by: str | None = Field(default=None, max_length=256)


MAX_ERASED_TURNS = 10_000
"""The most turns one deletion lists: ids of 36 characters keep the message under 400 kB, well
inside the broker's 1 MB."""


class ThreadDeleteRequested(ExecutionScope):
    """Erase what a deleted thread's turns left in the store (docs/langgraph-api.md, "Deleting
    a thread"). The gateway has made the thread a tombstone and checked that every listed turn
    ended; the orchestrator erases them, and any turn after them that ended, by its retention
    policy. ``execution_id`` is the thread's first turn: it keys the message, as it keys the
    thread's first run."""

    type: Literal["thread.delete_requested"] = "thread.delete_requested"
    version: Literal[1] = 1
    thread_id: Identifier
    execution_ids: list[Identifier] = Field(max_length=MAX_ERASED_TURNS)
    """The thread's turns the gateway found, every one ended."""
    requested_by: str | None = Field(default=None, max_length=256)


# --- orchestrator -> sandbox --------------------------------------------------------------------


class DispatchKind(StrEnum):
    START = "start"
    RESUME = "resume"


class ResumeInstruction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    suspension_id: int
    interrupt_ids: list[str]
    decision: str
    reviewer_notes: str | None = None
    reviewer: str | None = None
    agent_fingerprint: str | None = None
    """The agent version the suspension was taken with: the sandbox refuses to resume it under
    another unless the agent declares that version compatible."""
    values: dict[str, Any] | None = None
    """What ``interrupt(...)`` returns, per answered interrupt id. Absent in older commands:
    then every listed interrupt gets the Atlas shape."""
    decided_at: AwareDatetime | None = None
    """When the gateway accepted the decision: the sandbox measures the decision-to-resume
    latency from it. Absent in older commands."""
    command: ResumeCommand | None = Field(default=None, exclude_if=lambda v: v is None)
    """What the graph does besides (``goto``, ``update``, or ``end``); absent in older
    commands and in answers that carry none."""

    def resume_values(self) -> dict[str, Any]:
        if self.values is not None:
            return dict(self.values)
        flat = {"decision": self.decision, "reviewer_notes": self.reviewer_notes}
        return {interrupt_id: flat for interrupt_id in self.interrupt_ids}


class ExecutionDispatched(ExecutionScope):
    type: Literal["execution.dispatched"] = "execution.dispatched"
    version: Literal[1] = 1
    agent: Identifier
    epoch: int = Field(ge=1)
    """Attempt number; the sandbox reports carry it back so stale attempts are ignored."""
    kind: DispatchKind
    input: AgentInput | None = None
    resume: ResumeInstruction | None = None
    execution_version: int | None = Field(default=None, ge=2, exclude_if=lambda v: v is None)
    """The stored version of the execution that called for this command: while no version
    follows it, the command is current, which the sandbox learns from one point read instead
    of reading the execution. Absent in older commands (the sandbox then reads the execution)."""
    execution_trace: dict[str, str] | None = Field(default=None, exclude_if=lambda v: v is None)
    """The trace context of the request that created the execution (W3C ``traceparent``),
    which the run's span links to. Absent in older commands and for executions that have none."""


# --- sandbox -> orchestrator / notifier -----------------------------------------------------


class PendingInterrupt(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    interrupt_id: str
    value: Any = None


class ExecutionSuspended(ExecutionScope):
    type: Literal["execution.suspended"] = "execution.suspended"
    version: Literal[1] = 1
    agent: Identifier
    epoch: int = Field(ge=1)
    suspension_id: int = Field(ge=1)
    suspend_context: JsonObject
    allowed_decisions: list[str]
    interrupts: list[PendingInterrupt]
    suspended_at: AwareDatetime = Field(default_factory=utc_now)
    agent_fingerprint: str | None = None
    """The version of the agent's code that suspended; a resume under another is refused."""
    reviews: list[InterruptReview] = Field(default_factory=list)
    """What each pending interrupt asks of a reviewer (one decision, or decisions on actions)."""
    tools: dict[str, ToolRule] = Field(default_factory=dict)
    """The agent's tools and their review policies, to check edits that rename a call."""
    values: JsonObject | None = Field(default=None, exclude_if=lambda v: v is None)
    """The graph's state values when it suspended, as JSON; None when they are larger than a
    bound or not an object. Left out of the message when None, so suspensions without it are
    unchanged."""
    next: list[str] = Field(default_factory=list, max_length=100, exclude_if=lambda v: not v)
    """The nodes that run when the graph resumes (LangGraph's ``StateSnapshot.next``). Left out
    of the message when empty."""


class ReportOutcome(StrEnum):
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    REFUSED = "refused"
    """The sandbox would not resume: the agent's code changed since the suspension."""


class ExecutionFailure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    error_type: str
    message: str


class ExecutionReported(ExecutionScope):
    type: Literal["execution.reported"] = "execution.reported"
    version: Literal[1] = 1
    epoch: int = Field(ge=1)
    outcome: ReportOutcome
    result: Any = None
    error: ExecutionFailure | None = None
    custom_headers_unreadable: str | None = Field(
        default=None, max_length=1000, exclude_if=lambda v: v is None
    )
    """``started`` only: the dispatch carried sealed custom headers that did not open (sealed
    under a key this sandbox does not hold, or altered), so the run goes without them; why,
    never a value. Left out of the message when None, so reports without it are unchanged."""


# --- orchestrator -> everyone -----------------------------------------------------------------


class ExecutionStatusChanged(ExecutionScope):
    type: Literal["execution.status"] = "execution.status"
    version: Literal[1] = 1
    agent: Identifier
    status: ExecutionStatus
    previous_status: ExecutionStatus | None
    sequence: int = Field(ge=1)
    """Position of this status in the execution's history (1 is ``pending``). A status can be
    announced again after a crash with the same sequence: consumers drop anything not newer."""
    reason: str | None = None


class ReviewDeadlineReached(ExecutionScope):
    """A suspension still waits for a review at its remind or escalate deadline: reviewers are
    reminded, or the escalation channels told. (Expiry is a status: ``expired``, or the declared
    decision taken by the system.)"""

    type: Literal["review.deadline"] = "review.deadline"
    version: Literal[1] = 1
    agent: Identifier
    suspension_id: int = Field(ge=1)
    kind: Literal["remind", "escalate"]
    suspend_context: JsonObject
    allowed_decisions: list[str]
    reviews: list[InterruptReview] = Field(default_factory=list)
    expire_at: AwareDatetime | None = None
    """When the suspension expires, if it does."""
    escalate_to: list[str] = Field(default_factory=list)
    """For ``escalate``: the channels to tell (empty: the ones told of the suspension)."""


class RunWebhookDue(ExecutionScope):
    """A run that asked for a webhook has ended (at an interrupt or with its execution): the
    notifier calls ``url`` with ``payload``, once per run (``event_id`` names the run), retried
    and dead-lettered as its notifications are."""

    type: Literal["run.webhook"] = "run.webhook"
    version: Literal[1] = 1
    epoch: int = Field(ge=1)
    """The run's epoch (its id is ``payload.run_id``)."""
    url: str = Field(min_length=1, max_length=4096)
    payload: JsonObject
    """LangGraph's webhook body, but ``webhook_sent_at`` (set on each attempt)."""


# --- dead letters -----------------------------------------------------------------------------


class MessageDeadLettered(BaseModel):
    """A message that could not be processed, with why. Not an EventModel: the original may have
    no valid execution id at all."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    type: Literal["message.dead_lettered"] = "message.dead_lettered"
    version: Literal[1] = 1
    event_id: str = Field(default_factory=new_id)
    occurred_at: AwareDatetime = Field(default_factory=utc_now)
    source_topic: str
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    consumer: str
    reason: str
    error_type: str
    payload: str
    """The original message bytes, decoded as UTF-8 with replacement."""


AnyEvent = (
    ExecutionRequested
    | DecisionSubmitted
    | CancelRequested
    | ThreadDeleteRequested
    | ExecutionDispatched
    | ExecutionSuspended
    | ExecutionReported
    | ExecutionStatusChanged
    | ReviewDeadlineReached
)

EVENT_TYPES: dict[tuple[str, int], type[EventModel]] = {
    (model.model_fields["type"].default, model.model_fields["version"].default): model
    for model in (
        ExecutionRequested,
        DecisionSubmitted,
        CancelRequested,
        ThreadDeleteRequested,
        ExecutionDispatched,
        ExecutionSuspended,
        ExecutionReported,
        ExecutionStatusChanged,
        ReviewDeadlineReached,
    )
}


E = TypeVar("E", bound=EventModel)


class EventDecodeError(ValueError):
    """The bytes are not a valid event of an accepted type and version. Never retryable."""


def decode_event(raw: bytes, expected: tuple[type[E], ...]) -> E:
    """Parse one message into one of the ``expected`` models, with a precise reason on failure."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventDecodeError(f"message is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise EventDecodeError("message must be a JSON object")
    event_type, version = data.get("type"), data.get("version")
    accepted = {
        (m.model_fields["type"].default, m.model_fields["version"].default): m for m in expected
    }
    model = accepted.get((event_type, version))
    if model is None:
        known_versions = sorted(v for (t, v) in accepted if t == event_type)
        if known_versions:
            raise EventDecodeError(
                f"unsupported version {version!r} of {event_type!r}; accepted: {known_versions}"
            )
        names = sorted({t for (t, _) in accepted})
        raise EventDecodeError(f"unexpected event type {event_type!r} here; accepted: {names}")
    if not isinstance(data.get("event_id"), str) or not data["event_id"]:
        # Generated ids would differ on every redelivery and break idempotency.
        raise EventDecodeError(
            f"invalid {event_type} v{version}: event_id: a non-empty string is required"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise EventDecodeError(f"invalid {event_type} v{version}: {_describe(exc)}") from exc


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def encode_event(event: BaseModel) -> bytes:
    return event.model_dump_json().encode()
