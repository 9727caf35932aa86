"""What a reviewer may answer, and turning an answer into the values the agent resumes with.

Two kinds of pending interrupt:

- **decision** interrupts (an agent's own ``interrupt(...)``). One that declares
  ``allowed_decisions`` (the Atlas form) is answered with one of them, ignoring case, and
  receives ``{"decision": ..., "reviewer_notes": ...}``. One that declares none receives exactly
  the ``resume`` value sent (any JSON, as LangGraph's ``Command(resume=...)``), checked against
  the ``answer_schema`` it may declare; answered with the Atlas ``decision`` word instead, it
  receives the Atlas shape, as it always did.
- **actions** interrupts (LangChain's ``HumanInTheLoopMiddleware``): one or more tool calls, each
  with the decision types it allows (``approve``, ``edit``, ``reject``, ``respond``). Answered with
  an ordered list of decisions, one per action. In batched mode the agent receives
  ``{"decisions": [...]}``; in per-call mode (one interrupt per call) the single decision.

A ``resume`` that is an object keyed by interrupt ids (LangGraph's 32-hex ids, its own test)
answers each of those interrupts with its value, in one decision; those it leaves out stay
pending, as in LangGraph.

Everything here is pure: it runs in the gateway (to answer 400 / 409 before anything is stored)
and again in the orchestrator (for decisions published straight to the topic).
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from shared.domain.human_interrupt import HumanRequest, HumanResponseError, check_responses
from shared.events import ActionDecision, ActionReview, InterruptReview, ResumeCommand, ToolRule


class ReviewError(ValueError):
    """The answer does not fit what is pending: a 400 that says exactly why."""


class Resolution(BaseModel):
    """A valid answer: what each answered interrupt resumes with, and what to record."""

    model_config = ConfigDict(frozen=True)

    values: dict[str, Any]
    """Resume value per interrupt id."""
    summary: str
    """The decision as one word or a list (``approve``; ``approve, edit, reject``)."""
    edits: list[dict[str, Any]] = Field(default_factory=list)
    """For each edit: the action's position, and its name and args before and after."""


INTERRUPT_ID = re.compile(r"^[0-9a-f]{32}$")
"""LangGraph's interrupt ids (xxh3-128 hex digests): its test for a resume map."""

SUMMARY_LENGTH = 80


def is_resume_map(resume: Any) -> bool:
    """Is ``resume`` a map of interrupt id to value? LangGraph's own rule: an object whose every
    key looks like an interrupt id."""
    return isinstance(resume, dict) and all(INTERRUPT_ID.match(k) for k in resume)


def resolve(
    reviews: list[InterruptReview],
    *,
    decision: str | None,
    decisions: list[ActionDecision] | None,
    reviewer_notes: str | None,
    interrupt_id: str | None,
    tools: dict[str, ToolRule],
    resume: Any = None,
    command: ResumeCommand | None = None,
) -> Resolution:
    """Check an answer against the pending interrupts; raise ReviewError with the reason.
    ``resume`` is LangGraph's form (None: absent, since LangGraph's ``resume=None`` is no
    resume); ``decision`` and ``decisions`` are the Atlas and LangChain forms. A ``command``
    (``goto`` / ``update``) may come with any of them or alone: alone, it answers no interrupt
    (the interrupted nodes run again and interrupt again, as in LangGraph)."""
    forms = sum(form is not None for form in (decision, decisions, resume))
    if command is not None and command.end and forms:
        raise ReviewError("'end' answers the review by itself: send no resume beside it")
    if command is not None and forms == 0:
        return Resolution(values={}, summary=command.summary())
    if forms != 1:
        raise ReviewError(
            "send exactly one of 'decision' (a word), 'decisions' (a list) or 'resume' (the value"
            " the interrupt returns)"
        )
    return _resolve_one_form(
        reviews, decision, decisions, reviewer_notes, interrupt_id, tools, resume
    )


def described(resolution: Resolution, command: ResumeCommand | None) -> str:
    """The answer in one line for the record and the audit: the resolution's summary, and
    what its command asks besides (a command alone is its own summary)."""
    if command is None or not resolution.values:
        return resolution.summary
    return f"{resolution.summary}; {command.summary()}"


def _resolve_one_form(
    reviews: list[InterruptReview],
    decision: str | None,
    decisions: list[ActionDecision] | None,
    reviewer_notes: str | None,
    interrupt_id: str | None,
    tools: dict[str, ToolRule],
    resume: Any,
) -> Resolution:
    if resume is not None:
        return _resolve_resume(reviews, resume, reviewer_notes, interrupt_id, tools)
    target = _target(reviews, interrupt_id)
    if target.kind == "human_interrupt":
        raise ReviewError(
            f"interrupt {target.interrupt_id} is a HumanInterrupt: resume with a list of"
            ' HumanResponse, [{"type": "accept" | "edit" | "response" | "ignore", "args": ...}]'
        )
    if target.kind == "decision":
        if decisions is not None:
            raise ReviewError(
                "this suspension asks for one decision: send 'decision'"
                + _allowed_suffix(target.allowed_decisions)
            )
        assert decision is not None
        chosen = _match(decision, target.allowed_decisions)
        answer = {"decision": chosen, "reviewer_notes": reviewer_notes}
        return Resolution(values={target.interrupt_id: answer}, summary=chosen)
    if decisions is None:
        assert decision is not None
        decisions = [_single_word_for_actions(decision, target, reviewer_notes)]
    checked, edits = _check_actions(target, decisions, tools)
    if target.mode == "per_call":
        value: Any = checked[0].for_agent()
    else:
        value = {"decisions": [d.for_agent() for d in checked]}
    summary = ", ".join(d.type for d in checked)
    return Resolution(values={target.interrupt_id: value}, summary=summary, edits=edits)


def _resolve_resume(
    reviews: list[InterruptReview],
    resume: Any,
    reviewer_notes: str | None,
    interrupt_id: str | None,
    tools: dict[str, ToolRule],
) -> Resolution:
    if not is_resume_map(resume):
        return _resume_one(_target(reviews, interrupt_id), resume, reviewer_notes, tools)
    if interrupt_id is not None:
        raise ReviewError("a resume map names its interrupts itself: leave out 'interrupt_id'")
    if not resume:
        pending = ", ".join(r.interrupt_id for r in reviews)
        raise ReviewError(f"the resume map names no interrupt; pending: {pending}")
    parts = [
        _resume_one(_target(reviews, answered), value, reviewer_notes, tools)
        for answered, value in resume.items()
    ]
    return Resolution(
        values={k: v for part in parts for k, v in part.values.items()},
        summary="; ".join(part.summary for part in parts),
        edits=[edit for part in parts for edit in part.edits],
    )


def _resume_one(
    target: InterruptReview, value: Any, reviewer_notes: str | None, tools: dict[str, ToolRule]
) -> Resolution:
    where = f"interrupt {target.interrupt_id}"
    if value is None:
        raise ReviewError(f"{where}: resume with a value (null is no answer)")
    if target.kind == "human_interrupt":
        return _resume_human(where, target, value)
    if target.kind == "actions":
        checked, edits = _check_actions(target, _action_decisions(where, target, value), tools)
        agent_value: Any = (
            checked[0].for_agent()
            if target.mode == "per_call"
            else {"decisions": [d.for_agent() for d in checked]}
        )
        summary = ", ".join(d.type for d in checked)
        return Resolution(values={target.interrupt_id: agent_value}, summary=summary, edits=edits)
    if target.allowed_decisions:
        word, notes = _declared_decision(where, target, value, reviewer_notes)
        chosen = _match(word, target.allowed_decisions)
        answer = {"decision": chosen, "reviewer_notes": notes}
        return Resolution(values={target.interrupt_id: answer}, summary=chosen)
    if target.answer_schema is not None:
        try:
            jsonschema.validate(value, target.answer_schema)
        except jsonschema.ValidationError as exc:
            path = ".".join(str(p) for p in exc.absolute_path) or "the value"
            raise ReviewError(
                f"{where}: the answer does not fit its answer_schema: {path}: {exc.message}"
            ) from exc
        except jsonschema.SchemaError as exc:
            raise ReviewError(
                f"{where} declares an answer_schema that is not a JSON schema: {exc.message}"
            ) from exc
    return Resolution(values={target.interrupt_id: value}, summary=summary_of(value))


def _resume_human(where: str, target: InterruptReview, value: Any) -> Resolution:
    """A HumanInterrupt's answer: its HumanResponse list, returned by ``interrupt()`` as sent."""
    requests = [
        HumanRequest(a.name, a.args, a.description, list(a.allowed_decisions))
        for a in target.actions
    ]
    try:
        checked = check_responses(requests, value)
    except HumanResponseError as exc:
        raise ReviewError(f"{where}: {exc}") from exc
    return Resolution(
        values={target.interrupt_id: value},
        summary=", ".join(checked.types),
        edits=checked.edits,
    )


def _action_decisions(where: str, target: InterruptReview, value: Any) -> list[ActionDecision]:
    """LangChain's forms: ``{"decisions": [...]}``, a bare list, or (one action) one decision."""
    if isinstance(value, dict) and "decisions" in value and set(value) <= {"decisions"}:
        value = value["decisions"]
    if isinstance(value, dict) and "type" in value:
        value = [value]
    if not isinstance(value, list):
        raise ReviewError(
            f"{where} reviews {len(target.actions)} tool call(s): resume with"
            ' {"decisions": [...]}, one decision ({"type": "approve"}, ...) per call, in order'
        )
    try:
        return [ActionDecision.model_validate(item) for item in value]
    except ValueError as exc:
        raise ReviewError(f"{where}: {exc}") from exc


def _declared_decision(
    where: str, target: InterruptReview, value: Any, reviewer_notes: str | None
) -> tuple[str, str | None]:
    """A decision interrupt that declares its decisions takes one of them: the word, or the
    Atlas body ``{"decision": ..., "reviewer_notes": ...}``."""
    if isinstance(value, str):
        return value, reviewer_notes
    if (
        isinstance(value, dict)
        and isinstance(value.get("decision"), str)
        and set(value) <= {"decision", "reviewer_notes"}
        and isinstance(value.get("reviewer_notes"), str | None)
    ):
        return value["decision"], value.get("reviewer_notes", reviewer_notes)
    unknown = sorted(set(value) - {"decision", "reviewer_notes"}) if isinstance(value, dict) else []
    said = f" (unknown: {', '.join(map(repr, unknown))})" if unknown else ""
    raise ReviewError(
        f"{where} declares its decisions ({', '.join(target.allowed_decisions)}): resume with one"
        ' of them, or {"decision": ..., "reviewer_notes": ...}' + said
    )


def summary_of(value: Any) -> str:
    """A free answer in one line, for the record and the audit (the value itself is kept)."""
    if isinstance(value, str) and value.strip():
        text = value.strip()
    else:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= SUMMARY_LENGTH else text[: SUMMARY_LENGTH - 1] + "…"


class DecisionNotInList(ReviewError):
    def __init__(self, decision: str, allowed: list[str]) -> None:
        super().__init__(
            f"decision {decision!r} is not allowed here; allowed decisions: {', '.join(allowed)}"
        )
        self.decision = decision
        self.allowed = allowed


def _match(decision: str, allowed: list[str]) -> str:
    wanted = decision.strip()
    if not allowed:
        return wanted
    for candidate in allowed:
        if candidate.casefold() == wanted.casefold():
            return candidate
    raise DecisionNotInList(decision, allowed)


def _allowed_suffix(allowed: list[str]) -> str:
    return f"; allowed decisions: {', '.join(allowed)}" if allowed else ""


def _target(reviews: list[InterruptReview], interrupt_id: str | None) -> InterruptReview:
    if interrupt_id is not None:
        for review in reviews:
            if review.interrupt_id == interrupt_id:
                return review
        pending = ", ".join(r.interrupt_id for r in reviews)
        raise ReviewError(f"interrupt {interrupt_id!r} is not pending; pending: {pending}")
    if len(reviews) != 1:
        pending = ", ".join(r.interrupt_id for r in reviews)
        raise ReviewError(
            f"{len(reviews)} interrupts are pending ({pending}): name the one you answer with"
            " 'interrupt_id'"
        )
    return reviews[0]


def _single_word_for_actions(
    decision: str, target: InterruptReview, reviewer_notes: str | None
) -> ActionDecision:
    """The Atlas form stays valid where one action is pending and the word is a plain
    approve or reject (the notes become the rejection's message)."""
    if len(target.actions) != 1:
        names = ", ".join(a.name for a in target.actions)
        raise ReviewError(
            f"{len(target.actions)} actions are pending ({names}): send 'decisions', a list with"
            " one decision per action, in this order"
        )
    word = decision.strip().casefold()
    if word == "approve":
        return ActionDecision(type="approve")
    if word == "reject":
        return ActionDecision(type="reject", message=reviewer_notes)
    raise ReviewError(
        f"decision {decision!r} needs the list form: send 'decisions' with one of"
        f" {', '.join(target.actions[0].allowed_decisions)} and what it needs"
        " (edited_action for edit, message for respond)"
    )


def _check_actions(
    target: InterruptReview, decisions: list[ActionDecision], tools: dict[str, ToolRule]
) -> tuple[list[ActionDecision], list[dict[str, Any]]]:
    actions = target.actions
    if len(decisions) != len(actions):
        order = ", ".join(a.name for a in actions)
        raise ReviewError(
            f"{len(actions)} action(s) are pending and {len(decisions)} decision(s) were sent;"
            f" send one per action, in this order: {order}"
        )
    edits = []
    for position, (action, answer) in enumerate(zip(actions, decisions, strict=True), start=1):
        where = f"decision {position} ({answer.type}) for action {action.name}"
        if answer.type not in action.allowed_decisions:
            raise ReviewError(
                f"{where} is not allowed; allowed: {', '.join(action.allowed_decisions)}"
            )
        if answer.type == "respond" and not (answer.message and answer.message.strip()):
            raise ReviewError(f"{where} needs a 'message': it becomes the tool's result")
        if answer.type == "edit":
            edits.append(_check_edit(where, position, action, answer, tools))
        elif answer.edited_action is not None:
            raise ReviewError(f"{where}: 'edited_action' belongs only to an edit")
    return decisions, edits


def _check_edit(
    where: str,
    position: int,
    action: ActionReview,
    answer: ActionDecision,
    tools: dict[str, ToolRule],
) -> dict[str, Any]:
    edited = answer.edited_action
    if edited is None:
        raise ReviewError(f"{where} needs 'edited_action' with the tool's name and args")
    schema = action.args_schema
    if edited.name != action.name:
        rule = tools.get(edited.name)
        if rule is None:
            raise ReviewError(f"{where} renames the call to {edited.name!r}, which is not a tool")
        if stricter(rule.allowed_decisions, action.allowed_decisions):
            raise ReviewError(
                f"{where} renames the call to {edited.name}, whose policy is stricter"
                f" ({_policy_text(rule.allowed_decisions)}) than {action.name}'s"
                f" ({_policy_text(action.allowed_decisions)})"
            )
        schema = rule.args_schema
    if schema is not None:
        try:
            jsonschema.validate(edited.args, schema)
        except jsonschema.ValidationError as exc:
            path = ".".join(str(p) for p in exc.absolute_path) or "args"
            raise ReviewError(
                f"{where}: the edited args do not fit {edited.name}'s schema: {path}: {exc.message}"
            ) from exc
    return {
        "position": position,
        "before": {"name": action.name, "args": action.args},
        "after": edited.model_dump(),
    }


def stricter(target: list[str] | None, source: list[str] | None) -> bool:
    """May an edit of a ``source`` call not become a call to ``target``?

    A reviewer's edit must not produce a call the policy would not let a reviewer produce: the
    target is stricter when it needs review (``target`` is not None) and does not itself allow
    edits. A tool that runs without review is never stricter. (``source`` is the pending call's
    policy, which allows the edit being checked.)
    """
    del source  # the edit is already allowed on the source; only the target can forbid it
    return target is not None and "edit" not in target


def _policy_text(allowed: list[str] | None) -> str:
    return "runs without review" if allowed is None else "allows " + ", ".join(allowed)
