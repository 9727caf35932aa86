"""Delivering notifications: an outbox the notifier works through, apart from the Kafka handler.

The ``execution.suspended`` handler only stores one delivery per (execution, suspension,
channel) and returns, so a slow or dead endpoint never holds up a partition, and a redelivered
event finds the delivery already stored and notifies no one twice. This loop sends what is due,
several at a time, each with the channel's timeout; a failure is retried with exponential
backoff and jitter, and after the last attempt (or a failure that retrying cannot fix) the
delivery is dead: kept with its reason and listed by the gateway. Each poll reads only the
deliveries still pending (``NotificationStore.due``), never the history of every delivery made,
so an idle poll costs one small query however long the notifier has run.

Several notifier replicas may run the loop. Each attempt is claimed first (an insert under a
unique id), so exactly one replica makes attempt n. A replica that dies after claiming leaves
the delivery pending at that attempt; once it has been due for ``LOST_CLAIM_AFTER`` the attempt
counts as lost and the next one may be claimed. A replica frozen longer than that (not just
slow: sends time out far sooner) could then send twice; receivers deduplicate on
``webhook-id`` (the notification id), which is the same on every attempt.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

import structlog

from services.notifier.channels import Channel
from shared import metrics, tracing
from shared.notifications.model import Delivery, DeliveryFailed, DeliveryStatus
from shared.notifications.policy import after_attempt
from shared.store.notifications import NotificationStore

log = structlog.get_logger(__name__)

LOST_CLAIM_AFTER = timedelta(minutes=2)
BATCH = 20
_OUTCOME_LABELS = {
    DeliveryStatus.DELIVERED: "delivered",
    DeliveryStatus.PENDING: "retry",
    DeliveryStatus.DEAD: "dead",
}
Clock = Callable[[], datetime]


class Dispatcher:
    def __init__(
        self,
        store: NotificationStore,
        channels: Mapping[str, Channel],
        *,
        clock: Clock,
        owner: str,
        max_attempts: int,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._channels = channels
        self._clock = clock
        self._owner = owner
        self._max_attempts = max_attempts
        self._rng = rng or random.Random()

    async def run_once(self) -> int:
        """Send what is due now; return how many attempts this replica made."""
        due = await self._store.due(self._clock(), limit=BATCH)
        made = await asyncio.gather(*(self._attempt(delivery) for delivery in due))
        return sum(made)

    async def run_forever(self, poll_seconds: float) -> None:
        while True:
            try:
                made = await self.run_once()
            except Exception:  # the database blinked: log, and try again at the next tick
                log.exception("notifications.poll_failed")
                made = 0
            if made == 0:
                await asyncio.sleep(poll_seconds)

    async def _attempt(self, delivery: Delivery) -> int:
        number = await self._claim(delivery)
        if number is None:
            return 0
        claimed = delivery.model_copy(update={"attempts": number - 1})
        channel = self._channels.get(delivery.channel)
        error: str | None = None
        retryable = True
        with tracing.span(
            f"notify {delivery.channel}",
            parent=tracing.context_of(delivery.trace_context),
            attributes={
                "interlock.execution_id": delivery.notification.execution_id,
                "interlock.notification.channel": delivery.channel,
                "interlock.notification.attempt": number,
            },
        ) as span:
            if channel is None:
                error, retryable = f"channel {delivery.channel!r} is not configured any more", False
            else:
                try:
                    await channel.send(delivery.notification)
                except DeliveryFailed as exc:
                    error, retryable = exc.reason, exc.retryable
            if error is not None:
                tracing.mark_failed(error)
            span.set_attribute("interlock.notification.retryable", retryable)
        outcome = after_attempt(
            claimed,
            error=error,
            retryable=retryable,
            now=self._clock(),
            max_attempts=self._max_attempts,
            rng=self._rng,
        )
        await self._store.record(outcome)
        metrics.NOTIFICATION_DELIVERIES.labels(
            delivery.channel, _OUTCOME_LABELS[outcome.status]
        ).inc()
        log.info(
            "notification.attempted",
            delivery_id=delivery.delivery_id,
            channel=delivery.channel,
            attempt=number,
            status=outcome.status.value,
            error=error,
            execution_id=delivery.notification.execution_id,
        )
        return 1

    async def _claim(self, delivery: Delivery) -> int | None:
        """The attempt number this replica may make, or None (another replica has it)."""
        number = delivery.attempts + 1
        if await self._store.claim(delivery.delivery_id, number, self._owner):
            return number
        # Claimed by another replica. A delivery's next attempt only ever comes due later, so
        # unless this one came due LOST_CLAIM_AFTER ago, that replica may still be making it:
        # nothing to read. (Most failed claims are replicas polling the same due delivery.)
        if self._clock() - delivery.next_attempt_at <= LOST_CLAIM_AFTER:
            return None
        # Still listed at this attempt long after it came due: the claimer died mid-attempt
        # (the attempt is lost: take the next one), or the delivery has finished and a crash
        # left it listed (``latest`` says so, and stops the listing).
        current = await self._store.latest(delivery.delivery_id)
        stale = (
            current is not None
            and current.status is DeliveryStatus.PENDING
            and current.attempts == delivery.attempts
            and self._clock() - current.next_attempt_at > LOST_CLAIM_AFTER
        )
        if stale and await self._store.claim(delivery.delivery_id, number + 1, self._owner):
            return number + 1
        return None
