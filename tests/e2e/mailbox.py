"""An SMTP server on loopback for the end-to-end tests of email channels, with what its letters
say: their text and the decision links in it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller

from tests.ports import free_port

LINK_TEXT = re.compile(r"(\w+) without opening it \(asks to confirm\): (\S+)")
"""A decision link in an email's plain text (shared/notifications' wording)."""


@dataclass(frozen=True)
class Letter:
    recipients: list[str]
    message: Message

    def about(self, execution_id: str) -> bool:
        # The subject names the execution by its first eight characters.
        return execution_id[:8] in str(self.message["Subject"])

    def text(self) -> str:
        for part in self.message.walk():
            if part.get_content_type() == "text/plain":
                payload = part.get_payload(decode=True)
                return payload.decode() if isinstance(payload, bytes) else str(payload)
        return ""

    def links(self) -> dict[str, str]:
        """Decision (lower case) -> its link."""
        return {decision.lower(): url for decision, url in LINK_TEXT.findall(self.text())}


@dataclass
class Mailbox:
    letters: list[Letter] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content)
        self.letters.append(Letter(list(envelope.rcpt_tos), message))
        return "250 OK"

    @property
    def messages(self) -> list[Message]:
        return [letter.message for letter in self.letters]

    def links_for(self, address: str, execution_id: str) -> dict[str, str] | None:
        """The links of the email ``address`` alone received about the execution, once it came."""
        for letter in self.letters:
            if letter.recipients == [address] and letter.about(execution_id):
                return letter.links()
        return None

    def link(self, execution_id: str, decision: str) -> str | None:
        """The ``decision`` link of any email about the execution, once one came."""
        for letter in self.letters:
            if letter.about(execution_id) and decision in (links := letter.links()):
                return links[decision]
        return None


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """A mailbox and the loopback port its SMTP server listens on, for as long as the block."""
    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()
