"""What a reviewer may answer, and turning an answer into the values the agent resumes with.

Two kinds of pending interrupt:

- **decision** interrupts (an agent's own ``interrupt({...})``, the Atlas form): answered with one
  decision string, checked against ``allowed_decisions`` ignoring case; the agent receives
  ``{"decision": ..., "reviewer_notes": ...}``.
- **actions** interrupts (LangChain's ``HumanInTheLoopMiddleware``): one or more tool calls, each
  with the decision types it allows (``approve``, ``edit``, ``reject``, ``respond``). Answered with
  an ordered list of decisions, one per action. In batched mode the agent receives
  ``{"decisions": [...]}``; in per-call mode (one interrupt per call) the single decision.

Everything here is pure: it runs in the gateway (to answer 400 / 409 before anything is stored)
and again in the orchestrator (for decisions published straight to the topic).
"""

from __future__ import annotations

from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from shared.events import ActionDecision, ActionReview, InterruptReview, ToolRule


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


def resolve(
    reviews: list[InterruptReview],
    *,
    decision: str | None,
    decisions: list[ActionDecision] | None,
    reviewer_notes: str | None,
    interrupt_id: str | None,
    tools: dict[str, ToolRule],
) -> Resolution:
    """Check an answer against the pending interrupts; raise ReviewError with the reason."""
    if (decision is None) == (decisions is None):
        raise ReviewError("send exactly one of 'decision' (a word) or 'decisions' (a list)")
    target = _target(reviews, interrupt_id)
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


class DecisionNotInList(ReviewError):
    def __init__(self, decision: str, allowed: list[str]) -> None:
        super().__init__(
            f"decision {decision!r} is not allowed here; allowed decisions: {', '.join(allowed)}"
        )
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
