"""The text a reviewer reads, shared by the Slack and email channels (pure: no I/O, no markup).

Every piece is plain text; each channel escapes it for its own format (Slack mrkdwn, HTML).
Values come from the agent, so they are bounded here and never trusted as markup.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

from shared.notifications.model import Notification

VALUE_LIMIT = 300
"""Characters of one context value or tool-call line; enough to recognise, short enough that a
dozen of them fit in one Slack section."""

ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, marked with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + ELLIPSIS


def short_id(execution_id: str) -> str:
    """Enough of an execution id to tell executions apart in a subject line."""
    return execution_id[:8]


def title(notification: Notification) -> str:
    return f"Review requested: {notification.agent}"


def subject(notification: Notification) -> str:
    return f"{title(notification)} ({short_id(notification.execution_id)})"


def scope_line(notification: Notification) -> str:
    return (
        f"Project {notification.project_id} \N{MIDDLE DOT} workspace {notification.workspace_id}"
        f" \N{MIDDLE DOT} execution {notification.execution_id}"
    )


def value_text(value: Any, limit: int = VALUE_LIMIT) -> str:
    """A context value as one readable string: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return truncate(text, limit)


def context_items(notification: Notification, limit: int = VALUE_LIMIT) -> list[tuple[str, str]]:
    """The suspension's context as (key, value) pairs, in the agent's order."""
    return [
        (truncate(str(key), limit), value_text(value, limit))
        for key, value in notification.suspend_context.items()
    ]


def context_lines(notification: Notification, limit: int = VALUE_LIMIT) -> list[str]:
    return [f"{key}: {value}" for key, value in context_items(notification, limit)]


def decisions_heading(notification: Notification) -> str:
    return "Pending tool calls" if notification.actions else "Allowed decisions"


def decision_lines(notification: Notification, limit: int = VALUE_LIMIT) -> list[str]:
    """What the reviewer may answer: the decisions, or one line per pending tool call."""
    if notification.actions:
        return [_action_line(action, limit) for action in notification.actions]
    if notification.allowed_decisions:
        return [", ".join(notification.allowed_decisions)]
    # An empty or absent list means the agent accepts any non-empty decision.
    return ["any decision"]


def _action_line(action: dict[str, Any], limit: int) -> str:
    name = str(action.get("name") or "tool call")
    line = f"{name} {value_text(action.get('args') or {}, limit)}"
    if action.get("description"):
        line += f" \N{EM DASH} {value_text(action['description'], limit)}"
    decisions = action.get("allowed_decisions")
    if decisions:
        line += f" (decisions: {', '.join(str(d) for d in decisions)})"
    return truncate(line, limit)


def deadline_text(notification: Notification) -> str | None:
    if notification.deadline is None:
        return None
    return f"{notification.deadline.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def deadline_line(notification: Notification) -> str | None:
    text = deadline_text(notification)
    return None if text is None else f"Deadline: {text}"


def plain_text(notification: Notification, limit: int = VALUE_LIMIT) -> str:
    """The whole notification as plain text (the email's text part)."""
    parts = [title(notification), scope_line(notification), ""]
    if notification.suspend_context:
        parts += ["Context:", *(f"  {line}" for line in context_lines(notification, limit)), ""]
    parts += [f"{decisions_heading(notification)}:"]
    parts += [f"  - {line}" for line in decision_lines(notification, limit)]
    deadline = deadline_line(notification)
    if deadline:
        parts += ["", deadline]
    parts += ["", f"Open review: {notification.review_url}"]
    for decision, url in notification.action_links.items():
        parts.append(f"{decision.capitalize()} without opening it (asks to confirm): {url}")
    parts.append("")
    return "\n".join(parts)
