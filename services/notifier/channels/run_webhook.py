"""The webhook a run asked for (LangGraph's ``webhook`` parameter): LangGraph's body, POSTed to
the URL the run's request gave, with Standard Webhooks headers as the webhook channel's.

Unlike a configured channel, the URL comes from a client: before every attempt it is checked
again against the private-network guard (shared/webhook_urls.py) with the addresses its name
resolves to then, and redirects are never followed (httpx's default), so an answer cannot send
the body on to an address the guard refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx

from services.notifier.channels._http import post
from services.notifier.channels.webhook import parse_secret, signature_header
from shared import webhook_urls
from shared.notifications.model import DeliveryFailed, Notification
from shared.notifications.policy import RUN_WEBHOOK_CHANNEL

__all__ = ["RUN_WEBHOOK_CHANNEL", "RunWebhookChannel", "encode_run_body"]


def encode_run_body(notification: Notification, sent_at: datetime) -> bytes:
    """LangGraph's webhook body: the run as stored, and when this attempt sends it."""
    body = {**(notification.run or {}), "webhook_sent_at": sent_at.isoformat()}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str).encode()


class RunWebhookChannel:
    """POSTs each run's webhook to its own URL."""

    name = RUN_WEBHOOK_CHANNEL

    def __init__(
        self,
        secrets: list[str],
        *,
        allow_private: bool,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``secrets``: the ``whsec_`` secrets that sign each body (two while rotating; none:
        sent unsigned, which only a development setup should do). ``allow_private``: as
        ``INTERLOCK_WEBHOOK_ALLOW_PRIVATE_NETWORKS``."""
        self._keys = [parse_secret(secret) for secret in secrets]
        self._allow_private = allow_private
        self.timeout = timeout
        self._client = client
        self._clock = clock

    async def send(self, notification: Notification) -> None:
        url = notification.webhook_url
        if url is None:
            raise DeliveryFailed("a run webhook without a URL", retryable=False)
        try:
            await webhook_urls.check(url, allow_private=self._allow_private)
        except webhook_urls.WebhookUrlRefused as refused:
            # A name that stopped resolving may resolve again; a refused address will not.
            retryable = isinstance(refused, webhook_urls.HostUnresolved)
            raise DeliveryFailed(str(refused), retryable=retryable) from None
        now = self._clock()
        body = encode_run_body(notification, datetime.fromtimestamp(now, UTC))
        timestamp = int(now)
        msg_id = notification.notification_id
        headers = {
            "content-type": "application/json",
            "user-agent": "interlock-notifier",
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
        }
        if self._keys:
            headers["webhook-signature"] = signature_header(self._keys, msg_id, timestamp, body)
        await post(url, content=body, headers=headers, timeout=self.timeout, client=self._client)
