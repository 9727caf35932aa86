"""Slack channel: a Block Kit message to an incoming webhook.

Agent data goes into mrkdwn escaped per Slack's rules (``&``, ``<``, ``>``), so a context value
cannot mention ``<!channel>`` or disguise a link; every text is cut to Slack's limits, which
otherwise reject the whole message.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from services.notifier.channels import render
from services.notifier.channels._http import post
from shared.domain.principals import group
from shared.notifications.action_links import LinkMinter
from shared.notifications.model import Notification

HEADER_LIMIT = 150
SECTION_LIMIT = 3000
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape(text: str) -> str:
    """Text shown literally inside Slack mrkdwn."""
    return text.translate(_ESCAPES)


def _mrkdwn_section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _lines_section(heading: str, lines: list[str]) -> dict[str, Any]:
    """``*heading*`` then ``lines`` (already escaped), cut at a whole line before Slack's
    section limit with a count of what was left out, so no escape or markup is split."""
    text = f"*{escape(heading)}*"
    for index, line in enumerate(lines):
        candidate = f"{text}\n{line}"
        rest = f"\n{render.ELLIPSIS} and {len(lines) - index} more"
        if len(candidate) + len(rest) > SECTION_LIMIT:
            text += rest
            break
        text = candidate
    return _mrkdwn_section(text)


def message(notification: Notification) -> dict[str, Any]:
    """The incoming-webhook payload: fallback ``text`` (notifications, old clients) and blocks."""
    title = render.title(notification)
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": render.truncate(title, HEADER_LIMIT)},
        },
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": escape(render.scope_line(notification))}],
        },
    ]
    context = [
        f"*{escape(key)}*: {escape(value)}" for key, value in render.context_items(notification)
    ]
    if context:
        blocks.append(_lines_section("Context", context))
    decisions = [f"\N{BULLET} {escape(line)}" for line in render.decision_lines(notification)]
    blocks.append(_lines_section(render.decisions_heading(notification), decisions))
    if notification.deadline is not None:
        fallback = render.deadline_text(notification)
        # Slack shows the date in each reader's own time zone; the fallback is UTC.
        stamp = int(notification.deadline.timestamp())
        blocks.append(
            _mrkdwn_section(
                f"*Deadline:* <!date^{stamp}^{{date_short_pretty}} {{time}}|{fallback}>"
            )
        )
    blocks.append(
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Open review"},
                    "url": notification.review_url,
                    "style": "primary",
                    "action_id": "open_review",
                },
                *(
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": decision.capitalize()[:75]},
                        "url": url,
                        "action_id": f"decide_{index}",
                    }
                    for index, (decision, url) in enumerate(notification.action_links.items())
                ),
            ],
        }
    )
    text = f"{escape(render.subject(notification))}: {escape(notification.review_url)}"
    return {"text": text, "blocks": blocks}


class SlackChannel:
    """Posts review requests to a Slack incoming webhook (its URL is the credential)."""

    def __init__(
        self,
        name: str,
        url: str,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        links: LinkMinter | None = None,
    ) -> None:
        self.name = name
        self.url = url
        self.timeout = timeout
        self._client = client
        self._links = links

    async def send(self, notification: Notification) -> None:
        if self._links is not None:
            # Whoever reads the Slack channel may click: its links decide as the channel, a
            # group, which separation of duties never takes for a person.
            recipient = group("slack", self.name)
            notification = self._links.with_links(
                notification, channel=self.name, recipient=recipient
            )
        body = json.dumps(message(notification), ensure_ascii=False).encode()
        headers = {"content-type": "application/json; charset=utf-8"}
        await post(
            self.url, content=body, headers=headers, timeout=self.timeout, client=self._client
        )
