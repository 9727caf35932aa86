"""How executions look in a terminal: Rich tables and panels, and the plain review block.

The review block is plain text (not Rich markup) because its exact shape is the Atlas CLI's:
scripts and reviewers' muscle memory depend on it, and ``[1-2]`` would be eaten as markup.

Whatever an agent or a person wrote (context, arguments, messages, notes, reasons, errors, ids)
goes through ``plain`` or ``cell``: invisible characters are shown as ``<U+XXXX>``
(interlock/client/visible.py), and Rich never reads it as markup.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from interlock.client.api import Json
from interlock.client.visible import json_text, visible

STATUS_STYLE = {
    "completed": "green",
    "error": "red",
    "cancelled": "red",
    "expired": "red",
    "suspended": "yellow",
    "pending": "cyan",
    "running": "cyan",
    "resuming": "cyan",
}
REVIEW_HEADER = "--- Execution suspended for human review ---"


def plain(value: Any) -> str:
    """A value as a reviewer reads it: strings as they are, anything else as compact JSON;
    invisible characters shown as ``<U+XXXX>`` either way."""
    return visible(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def cell(value: Any, style: str = "") -> Text:
    """``plain(value)`` for a table or a panel: a Text, so ``[...]`` in it is not markup."""
    return Text(plain(value), style=style)


def status_text(status: str) -> Text:
    return cell(status, STATUS_STYLE.get(status, ""))


def failure(error: Any) -> str:
    """A failed execution's ``error`` as a sentence: its type, then its message."""
    if not isinstance(error, dict):
        return plain(error)
    kind = str(error.get("error_type") or "").strip()
    message = str(error.get("message") or "").strip()
    if kind in ("", "unknown"):
        return plain(message) if message else "the agent failed without saying why"
    return plain(f"{kind}: {message}" if message else kind)


def context_items(execution: Json) -> list[tuple[str, Any]]:
    """The suspend context as the reviewer reads it: ``allowed_decisions`` is shown as the
    choices, not as context."""
    context = execution.get("suspend_context") or {}
    return [(k, v) for k, v in context.items() if k != "allowed_decisions"]


def decision_block(execution: Json, choices: list[str]) -> str:
    lines = [REVIEW_HEADER, ""]
    lines += [f"  {plain(k)}: {plain(v)}" for k, v in context_items(execution)]
    lines += ["", "Select a decision:"]
    lines += [f"  {i}) {plain(choice)}" for i, choice in enumerate(choices, 1)]
    return "\n".join(lines)


def action_block(action: Json, index: int, total: int) -> str:
    lines = [f"Action {index} of {total}: {plain(action['name'])}"]
    lines += [f"  {plain(k)}: {plain(v)}" for k, v in action.get("args", {}).items()]
    if action.get("description"):
        description = plain(str(action["description"]))
        lines += ["", *(f"  | {line}" for line in description.splitlines())]
    return "\n".join(lines)


def agent_output(execution: Json) -> str | None:
    """The agent's last words: the last assistant message with text, else its ``outcome``."""
    result = execution.get("result")
    if not isinstance(result, dict):
        return None if result is None else plain(result)
    for message in reversed(result.get("messages") or []):
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("content")
        ):
            return plain(str(message["content"]))
    outcome = result.get("outcome")
    return None if outcome is None else plain(str(outcome))


def executions_table(items: list[Json], title: str = "Executions") -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("execution", no_wrap=True)
    table.add_column("agent")
    table.add_column("status")
    table.add_column("created")
    table.add_column("updated")
    for item in items:
        table.add_row(
            cell(item["execution_id"]),
            cell(item["agent"]),
            status_text(item["status"]),
            _when(item.get("created_at")),
            _when(item.get("updated_at")),
        )
    return table


def execution_panel(execution: Json) -> Panel:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("agent", cell(execution["agent"]))
    facts.add_row("status", status_text(execution["status"]))
    facts.add_row("input", cell(_input(execution)))
    facts.add_row("created", _when(execution.get("created_at")))
    facts.add_row("updated", _when(execution.get("updated_at")))
    parts: list[RenderableType] = [facts]
    if execution["status"] == "suspended":
        parts += [Text(""), review_summary(execution)]
    if execution["status"] == "completed":
        parts.append(Text(f"\noutput: {agent_output(execution) or '(none)'}"))
    if execution.get("error"):
        parts.append(Text(f"\nerror: {failure(execution['error'])}", style="red"))
    for decision in execution.get("decisions") or []:
        parts.append(Text(f"decision {plain(decision['suspension_id'])}: {_decided(decision)}"))
    return Panel(
        Group(*parts), title=cell(execution["execution_id"]), title_align="left", expand=False
    )


def review_summary(execution: Json) -> RenderableType:
    """What a pending review asks, for listings (the interactive prompt uses the plain block)."""
    lines = Table.grid(padding=(0, 2))
    lines.add_column(style="bold")
    lines.add_column()
    lines.add_row("generation", str(execution.get("generation")))
    lines.add_row("suspended", _when(execution.get("suspended_at")))
    reviews = execution.get("reviews") or []
    actions = [a for r in reviews if r.get("kind") == "actions" for a in r.get("actions", [])]
    if actions:
        for action in actions:
            lines.add_row(cell(f"action {plain(action['name'])}"), cell(action.get("args", {})))
            decisions = ", ".join(plain(d) for d in action.get("allowed_decisions", []))
            lines.add_row("", cell(f"decisions: {decisions}"))
    else:
        for key, value in context_items(execution):
            lines.add_row(cell(key), cell(value))
        choices = execution.get("allowed_decisions") or ["(any)"]
        lines.add_row("decisions", cell(", ".join(plain(d) for d in choices)))
    return lines


def reviews_panels(items: list[Json]) -> list[Panel]:
    return [
        Panel(
            Group(
                cell(f"agent: {plain(item['agent'])}   input: {_input(item)}"),
                review_summary(item),
            ),
            title=cell(item["execution_id"]),
            title_align="left",
            border_style="yellow",
            expand=False,
        )
        for item in items
    ]


def audit_tables(trail: Json) -> list[Table]:
    title = cell(f"Audit trail of {plain(trail['execution_id'])}")
    history = Table(title=title, title_justify="left")
    for column in ("at", "actor", "action", "change", "reason"):
        history.add_column(column)
    for entry in trail.get("items", []):
        change = ""
        if entry.get("to_status"):
            change = f"{entry.get('from_status') or '-'} -> {entry['to_status']}"
        history.add_row(
            _when(entry.get("at")),
            cell(entry.get("actor") or ""),
            cell(entry.get("action") or ""),
            cell(change),
            cell(entry.get("reason") or ""),
        )
    tables = [history]
    if trail.get("decisions"):
        decisions = Table(title="Decisions", title_justify="left")
        for column in ("suspension", "decision", "reviewer", "notes", "at"):
            decisions.add_column(column)
        for decision in trail["decisions"]:
            decisions.add_row(
                cell(str(decision["suspension_id"])),
                Text(_decided(decision)),
                cell(decision.get("reviewer") or ""),
                cell(decision.get("reviewer_notes") or ""),
                _when(decision.get("decided_at")),
            )
        tables.append(decisions)
    return tables


def print_json(console: Console, body: Any) -> None:
    # A plain write, not Rich's JSON highlighter: the output must stay machine-readable.
    console.file.write(json_text(body) + "\n")


def _decided(decision: Json) -> str:
    text = plain(str(decision.get("decision", "")))
    if decision.get("edits"):
        text += f" (edits: {plain(decision['edits'])})"
    return text


def _input(execution: Json) -> str:
    agent_input = execution.get("input") or {}
    if agent_input.get("message") is not None:
        return plain(str(agent_input["message"]))
    return f"{len(agent_input.get('messages') or [])} messages"


def _when(stamp: Any) -> str:
    # ISO timestamps to the second: enough to tell reviews apart, short enough for a table.
    return "" if not stamp else plain(str(stamp).replace("T", " ")[:19])
