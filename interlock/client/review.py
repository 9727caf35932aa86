"""The inline review prompt: ask the reviewer for a decision and build the resume body.

Prompts go through Typer so they read the same stdin the CLI was given (a terminal, or a
test's input). EOF or Ctrl-C at any prompt raises ``typer.Abort``; the caller decides what that
means.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import typer

from interlock.client.api import Json
from interlock.client.render import REVIEW_HEADER, action_block, decision_block, plain
from interlock.client.visible import visible

NOTES_PROMPT = "Reviewer notes (optional): [default: ]"


def ask_review(execution: Json) -> Json:
    """Walk the pending review of a suspended execution; returns the resume body."""
    reviews: list[Json] = execution.get("reviews") or []
    review = reviews[0] if reviews else {"kind": "decision"}
    if review.get("kind") == "actions":
        body = _ask_actions(execution, review)
    else:
        body = _ask_decision(execution, review)
    notes = _optional(NOTES_PROMPT)
    if notes:
        body["reviewer_notes"] = notes
    if execution.get("generation") is not None:
        # Guards against answering a suspension that moved on while the reviewer thought.
        body["generation"] = execution["generation"]
    if len(reviews) > 1:
        # Several interrupts pending (per-call mode): this answers the first; the next one is
        # offered when the execution is read again.
        body["interrupt_id"] = review["interrupt_id"]
    return body


def _ask_decision(execution: Json, review: Json) -> Json:
    choices = list(review.get("allowed_decisions") or execution.get("allowed_decisions") or [])
    typer.echo(decision_block(execution, choices))
    if not choices:
        # The agent declared no decisions: interrupt() returns whatever is sent, as LangGraph's
        # Command(resume=...).
        return {"resume": _ask_answer(review.get("answer_schema"))}
    return {"decision": _choose(choices)}


def _ask_answer(schema: Json | None) -> Any:
    """The value for an interrupt that declares no decisions: JSON as the value it spells
    (``true``, ``30``, ``{...}``), other text as that text; re-asked until it fits the
    ``answer_schema`` the interrupt declares, so a typo is caught here, not as a 400."""
    if schema:
        typer.echo(f"The answer must fit: {visible(json.dumps(schema, ensure_ascii=False))}")
    while True:
        raw = str(typer.prompt("Answer (JSON or text)", prompt_suffix=": ")).strip()
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if schema:
            try:
                jsonschema.validate(value, schema)
            except jsonschema.ValidationError as exc:
                typer.echo(f"Invalid answer: {plain(exc.message)}")
                continue
        if value == "":
            typer.echo("Type an answer.")
            continue
        return value


def _ask_actions(execution: Json, review: Json) -> Json:
    actions: list[Json] = review.get("actions") or []
    typer.echo(REVIEW_HEADER)
    decisions: list[Json] = []
    for index, action in enumerate(actions, 1):
        typer.echo("")
        typer.echo(action_block(action, index, len(actions)))
        typer.echo("")
        typer.echo("Select a decision:")
        choices = list(action.get("allowed_decisions") or [])
        for number, choice in enumerate(choices, 1):
            typer.echo(f"  {number}) {plain(choice)}")
        decisions.append(_action_decision(action, _choose(choices)))
    return {"decisions": decisions}


def _action_decision(action: Json, kind: str) -> Json:
    if kind == "edit":
        args = _ask_args(action)
        return {"type": "edit", "edited_action": {"name": action["name"], "args": args}}
    if kind == "reject":
        message = _optional("Message for the agent (optional): [default: ]")
        return {"type": "reject", **({"message": message} if message else {})}
    if kind == "respond":
        return {"type": "respond", "message": typer.prompt("Response", prompt_suffix=": ")}
    return {"type": kind}


def _ask_args(action: Json) -> dict[str, Any]:
    """Edited args as a JSON object, re-asked until it parses (and fits the tool's schema,
    when the gateway gave one): a typo is caught here, not as a 400 after the fact."""
    current = json.dumps(action.get("args", {}), ensure_ascii=False)
    typer.echo(f"Current args: {visible(current)}")
    schema = action.get("args_schema")
    while True:
        raw = typer.prompt("Edited args (JSON)", prompt_suffix=": ")
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as exc:
            typer.echo(f"Invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
            continue
        if not isinstance(args, dict):
            typer.echo("Invalid JSON: the args must be a JSON object")
            continue
        if schema:
            try:
                jsonschema.validate(args, schema)
            except jsonschema.ValidationError as exc:
                typer.echo(f"Invalid args for {plain(action['name'])}: {plain(exc.message)}")
                continue
        return args


def _choose(choices: list[str]) -> str:
    # A number from the list, or the decision's own name (easier to script, and to read back).
    while True:
        answer = str(typer.prompt(f"Select [1-{len(choices)}]", prompt_suffix=": ")).strip()
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return choices[int(answer) - 1]
        for choice in choices:
            if answer.lower() == choice.lower():
                return choice
        typer.echo(f"Choose a number from 1 to {len(choices)}.")


def _optional(text: str) -> str:
    value: str = typer.prompt(text, default="", show_default=False, prompt_suffix=" ")
    return value.strip()
