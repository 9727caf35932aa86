"""What a LangGraph client asks for, in Interlock's terms: a run's body, its input as an
execution's messages, ``command.resume`` as a reviewer's answer. Pure, no I/O; every refusal is
a 400 problem that names what to send instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.gateway.answers import ReviewAnswer
from services.gateway.bodies import json_object
from services.gateway.problems import Problem
from services.gateway.schemas import INPUT_TITLES
from shared.events import AgentInput, Identifier, ResumeCommand
from shared.graph_input import InputError, graph_state

STREAM_MODES = ("values", "updates", "messages", "messages-tuple", "custom", "events", "debug")


@dataclass(frozen=True)
class StreamOptions:
    """What a stream of a run asks for: its modes, and whether subgraphs' events are in it."""

    modes: tuple[str, ...] = ("values",)
    subgraphs: bool = False


def stream_modes(asked: str | list[str] | None) -> tuple[str, ...]:
    """The stream modes asked for (``values`` when none, as LangGraph does)."""
    modes = [asked] if isinstance(asked, str) else list(asked or ["values"])
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise unsupported(
            f"stream_mode {', '.join(unknown)}: Interlock streams {', '.join(STREAM_MODES)}"
        )
    return tuple(dict.fromkeys(modes))


class RunRequest(BaseModel):
    """The body of ``runs.create`` / ``wait`` / ``stream`` (every field langgraph-sdk sends).
    Fields Interlock cannot honour are refused when set (``unsupported``), never ignored in
    silence; the few it ignores are harmless here and listed in docs/langgraph-api.md."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: Identifier
    input: Any = None
    command: dict[str, Any] | None = None
    stream_mode: str | list[str] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    feedback_keys: list[str] | None = None
    webhook: str | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    checkpoint_during: bool | None = None
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue"] | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: float | None = None
    durability: str | None = None
    strict_resume: bool | None = None
    langsmith_tracer: Any = None

    def fork_checkpoint(self) -> str | None:
        """The checkpoint a run with an input starts from (``checkpoint_id``, or
        ``checkpoint.checkpoint_id``), or None: the thread's latest."""
        given = self.checkpoint_id or (self.checkpoint or {}).get("checkpoint_id")
        return str(given) if given is not None else None

    def stream_options(self) -> StreamOptions:
        """The stream asked for (``values`` when no mode is named, as LangGraph does)."""
        return StreamOptions(stream_modes(self.stream_mode), bool(self.stream_subgraphs))


def run_request(raw: Any) -> RunRequest:
    body = json_object(raw, RunRequest, required=True)
    if body.command is not None and body.input == {}:
        # useStream sends an empty input beside every command: no input, as LangGraph reads it.
        body = body.model_copy(update={"input": None})
    refuse_unsupported(body)
    regenerates = body.input is None and body.command is None and body.fork_checkpoint()
    if (body.input is None) == (body.command is None) and not regenerates:
        raise Problem(
            400,
            "invalid-request",
            "Invalid request",
            "send either 'input' (to start the thread's run) or 'command' (to answer its"
            " interrupt), not both and not neither; without either, a 'checkpoint' of the"
            " thread's history runs the turn after it again",
        )
    return body


def refuse_unsupported(body: RunRequest) -> None:
    """Options that would change what runs: refused, so nobody believes they took effect."""
    set_options = {
        "interrupt_before": body.interrupt_before,
        "interrupt_after": body.interrupt_after,
        "after_seconds": body.after_seconds,
        "config": body.config or None,
        "context": body.context or None,
    }
    named = [name for name, value in set_options.items() if value is not None]
    if named:
        raise unsupported(
            f"{', '.join(named)}: not supported by Interlock's LangGraph API (a run is durable"
            " and runs its agent as registered; see docs/langgraph-api.md)"
        )


MAX_TTL_MINUTES = 100 * 365 * 24 * 60.0
"""A century: a longer time to live is a typo, not a retention policy."""

TtlMinutes = Annotated[float, Field(gt=0, le=MAX_TTL_MINUTES)]


class ThreadTtl(BaseModel):
    """LangGraph's thread ``ttl``: ``{"strategy": "delete", "ttl": minutes}`` (the clients send a
    bare number of minutes as that)."""

    model_config = ConfigDict(extra="forbid")

    strategy: str = "delete"
    ttl: TtlMinutes


TtlField = dict[str, Any] | TtlMinutes | None
"""A body's ``ttl`` as declared: the object is validated as ``ThreadTtl`` by ``ttl_minutes``
(hand-declared bodies cannot name a nested model no response uses: services/gateway/openapi.py)."""


def ttl_minutes(given: dict[str, Any] | float | None) -> float | None:
    """The thread's time to live in minutes, or None; refuses a strategy Interlock lacks."""
    if given is None or isinstance(given, (int, float)):
        return given
    asked = json_object(given, ThreadTtl, required=True)
    if asked.strategy != "delete":
        raise unsupported(
            f"ttl strategy {asked.strategy!r}: an expired thread is deleted whole (strategy"
            " 'delete'); its checkpoints are not pruned before that"
        )
    return asked.ttl


def unsupported(detail: str) -> Problem:
    return Problem(400, "unsupported-option", "Unsupported option", detail)


def agent_input(value: Any) -> AgentInput:
    """A run's ``input``, the graph's input state as LangGraph takes it: any keys, its
    ``messages`` in any of LangChain's forms (shared/graph_input.py)."""
    try:
        return AgentInput(state=graph_state(value))
    except InputError as exc:
        raise Problem(400, exc.problem_type, INPUT_TITLES[exc.problem_type], exc.detail) from exc


class Command(BaseModel):
    model_config = ConfigDict(extra="forbid")

    resume: Any = Field(default=None)
    update: Any = None
    goto: Any = None


def review_answer(command: dict[str, Any]) -> ReviewAnswer:
    """A command as the answer the resume route takes, judged by the same rules after:
    ``resume`` is its ``resume`` form, the value the pending ``interrupt()`` returns exactly as
    LangGraph passes it, or an object keyed by the ids of pending interrupts answering each of
    them (shared/domain/review.py says what each kind of interrupt accepts); ``goto`` and
    ``update`` are what the graph does besides, with or without ``resume``, as LangGraph's
    ``Command`` (a name or a list of names, ``Send`` as ``{"node", "input"}``; an object or
    ``[key, value]`` pairs)."""
    parsed = json_object(command, Command, required=True)
    extra = None
    if parsed.goto is not None or parsed.update is not None:
        goto = parsed.goto if isinstance(parsed.goto, list) else [parsed.goto]
        extra = json_object(
            {"goto": [g for g in goto if g is not None], "update": parsed.update},
            ResumeCommand,
            required=True,
        )
    if parsed.resume is None and extra is None:
        raise Problem(
            400,
            "invalid-request",
            "Invalid request",
            "command: send 'resume' (the value the interrupt returns), 'goto' or 'update'",
        )
    return ReviewAnswer(resume=parsed.resume, command=extra)
