"""Notification channels: each turns a ``Notification`` into one delivery (a signed webhook, a
Slack message, an email).

A channel only delivers; scheduling retries and marking deliveries dead belong to the notifier,
which decides from ``DeliveryFailed.retryable``.
"""

from __future__ import annotations

from typing import Protocol

from shared.notifications.model import DeliveryFailed, Notification

__all__ = ["Channel", "DeliveryFailed"]


class Channel(Protocol):
    """One configured destination for review notifications."""

    name: str

    async def send(self, notification: Notification) -> None:
        """Deliver once, within the channel's timeout. Returns on success; otherwise raises
        ``DeliveryFailed``, with ``retryable=False`` when trying again cannot help (HTTP 4xx
        other than 408/409/425/429, an SMTP 5xx, a malformed address)."""
        ...
