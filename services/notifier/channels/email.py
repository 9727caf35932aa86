"""Email channel: a plain-text and HTML message over SMTP (aiosmtplib).

The HTML part escapes every piece of agent data; SMTP replies decide retryability: 4xx is
"try later", 5xx is permanent.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr

import aiosmtplib

from services.notifier.channels import render
from shared.domain.principals import person
from shared.notifications.action_links import LinkMinter
from shared.notifications.model import DeliveryFailed, Notification

VALUE_LIMIT = 2000
"""An email has room for longer context values than a chat message."""


def parse_address(value: str) -> Address:
    """``a@example.com`` or ``Name <a@example.com>``; ValueError when it is anything else."""
    malformed = ValueError(f"malformed email address {value!r}")
    # parseaddr is lenient: it would read "a@example.com\r\nBcc: eve@..." or "a@x, b@y" as
    # the first address alone, so control characters and leftovers are refused here.
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise malformed
    display_name, addr_spec = parseaddr(value)
    bracketed, bare = f"<{addr_spec}>", value.strip()
    if not (bare.endswith(bracketed) if display_name else bare in (addr_spec, bracketed)):
        raise malformed
    try:
        address = Address(display_name=display_name, addr_spec=addr_spec)
    except (ValueError, IndexError, HeaderParseError):
        raise malformed from None
    if not address.username or not address.domain:
        raise malformed
    return address


def build_message(
    notification: Notification, sender: Address, recipients: list[Address]
) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = render.subject(notification)
    message["From"] = sender
    message["To"] = recipients
    message["Date"] = format_datetime(notification.created_at)
    # The same id on every attempt: a mail system that already has the message drops a retry.
    # A message with links is one recipient's own (their links decide as them): its id too.
    own = f":{recipients[0].addr_spec}" if notification.action_links else ""
    digest = hashlib.sha256((notification.notification_id + own).encode()).hexdigest()[:32]
    message["Message-ID"] = f"<{digest}@{sender.domain}>"
    # RFC 3834: an automatic message; out-of-office replies should not answer it.
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(render.plain_text(notification, VALUE_LIMIT))
    message.add_alternative(html_body(notification), subtype="html")
    return message


def html_body(notification: Notification) -> str:
    def e(text: str) -> str:
        return html.escape(text, quote=True)

    parts = [
        "<!DOCTYPE html>",
        '<html><body style="font-family: sans-serif; line-height: 1.4">',
        f"<h2>{e(render.title(notification))}</h2>",
        f'<p style="color: #555">{e(render.scope_line(notification))}</p>',
    ]
    items = render.context_items(notification, VALUE_LIMIT)
    if items:
        parts.append('<h3>Context</h3><table cellpadding="4">')
        parts += [
            f'<tr><th align="left" valign="top">{e(key)}</th>'
            f'<td style="white-space: pre-wrap">{e(value)}</td></tr>'
            for key, value in items
        ]
        parts.append("</table>")
    parts.append(f"<h3>{e(render.decisions_heading(notification))}</h3><ul>")
    parts += [f"<li>{e(line)}</li>" for line in render.decision_lines(notification, VALUE_LIMIT)]
    parts.append("</ul>")
    deadline = render.deadline_text(notification)
    if deadline:
        parts.append(f"<p><strong>Deadline:</strong> {e(deadline)}</p>")
    parts.append(f'<p><a href="{e(notification.review_url)}">Open review</a></p>')
    if notification.action_links:
        links = " · ".join(
            f'<a href="{e(url)}">{e(decision.capitalize())}</a>'
            for decision, url in notification.action_links.items()
        )
        parts.append(f"<p>Or decide from here (you will be asked to confirm): {links}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _failure(exc: Exception, timeout: float) -> DeliveryFailed:
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        refused = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
        temporary = any(r.code < 500 for r in exc.recipients)
        return DeliveryFailed(f"every recipient refused ({refused})", retryable=temporary)
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return DeliveryFailed(f"SMTP {exc.code} {exc.message}", retryable=exc.code < 500)
    if isinstance(exc, TimeoutError):
        return DeliveryFailed(f"no answer within {timeout:g}s", retryable=True)
    if isinstance(exc, aiosmtplib.SMTPNotSupported | ValueError):
        # The server lacks what the configuration asks for (STARTTLS, AUTH, SMTPUTF8).
        return DeliveryFailed(f"SMTP: {exc}", retryable=False)
    return DeliveryFailed(f"SMTP connection failed: {exc}", retryable=True)


class EmailChannel:
    """Emails review requests to a fixed list of reviewers through one SMTP server.

    With links (``action_links = true``) each recipient gets a message of their own: a link
    decides on behalf of the person it was sent to, so no one may receive another's links.
    """

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        sender: str,
        recipients: list[str],
        username: str | None = None,
        password: str | None = None,
        starttls: bool = False,
        timeout: float = 10.0,
        links: LinkMinter | None = None,
    ) -> None:
        """``starttls``: upgrade with STARTTLS and fail if the server cannot; False sends in
        the clear (a relay on localhost or a private network)."""
        self.name = name
        self.host = host
        self.port = port
        self.sender = sender
        self.recipients = recipients
        self.username = username
        self._password = password
        self.starttls = starttls
        self.timeout = timeout
        self._links = links

    async def send(self, notification: Notification) -> None:
        try:
            sender = parse_address(self.sender)
            recipients = [parse_address(recipient) for recipient in self.recipients]
        except ValueError as exc:
            raise DeliveryFailed(str(exc), retryable=False) from None
        if not recipients:
            raise DeliveryFailed("no recipients configured", retryable=False)
        if self._links is None or not notification.link_decisions:
            await self._send_one(build_message(notification, sender, recipients), recipients)
            return
        await self._send_each(notification, sender, recipients, self._links)

    async def _send_each(
        self,
        notification: Notification,
        sender: Address,
        recipients: list[Address],
        links: LinkMinter,
    ) -> None:
        """One message per recipient, each with links of their own; failures are judged as for
        one message to them all (see ``_send_one``)."""
        failures: list[tuple[Address, DeliveryFailed]] = []
        for recipient in recipients:
            own = links.with_links(
                notification, channel=self.name, recipient=person(recipient.addr_spec)
            )
            try:
                await self._send_one(build_message(own, sender, [recipient]), [recipient])
            except DeliveryFailed as exc:
                failures.append((recipient, exc))
        if not failures:
            return
        detail = "; ".join(f"{r.addr_spec}: {exc.reason}" for r, exc in failures)
        if len(failures) < len(recipients):
            # The others already have theirs: a retry would send them a second copy.
            raise DeliveryFailed(
                f"delivered to {len(recipients) - len(failures)} of {len(recipients)}"
                f" recipients; refused: {detail}",
                retryable=False,
            )
        raise DeliveryFailed(detail, retryable=all(exc.retryable for _, exc in failures))

    async def _send_one(self, message: EmailMessage, recipients: list[Address]) -> None:
        try:
            # aiosmtplib's timeout is per command; this one bounds the whole conversation.
            async with asyncio.timeout(self.timeout):
                refused, _ = await aiosmtplib.send(
                    message,
                    sender=parse_address(self.sender).addr_spec,
                    recipients=[recipient.addr_spec for recipient in recipients],
                    hostname=self.host,
                    port=self.port,
                    username=self.username,
                    password=self._password,
                    start_tls=self.starttls,
                    timeout=self.timeout,
                )
        except (aiosmtplib.SMTPException, OSError, TimeoutError, ValueError) as exc:
            raise _failure(exc, self.timeout) from exc
        if refused:
            # The others already have it: a retry would send them a second copy, so this
            # goes dead with the refused addresses for an operator to fix.
            detail = "; ".join(
                f"{address}: {reply.code} {reply.message}" for address, reply in refused.items()
            )
            raise DeliveryFailed(
                f"delivered to {len(recipients) - len(refused)} of {len(recipients)} recipients;"
                f" refused: {detail}",
                retryable=False,
            )
