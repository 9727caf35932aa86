"""Pure rules of notifying: what a suspension's notification says, and when to try again."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from shared.events import ExecutionSuspended, ReviewDeadlineReached, RunWebhookDue
from shared.notifications.model import Delivery, DeliveryStatus, Notification

BACKOFF_BASE = timedelta(seconds=2)
BACKOFF_CAP = timedelta(minutes=10)


NOTIFICATION_TYPES = {"remind": "review.reminder", "escalate": "review.escalated"}


def notification_for(
    event: ExecutionSuspended | ReviewDeadlineReached, channel: str, review_page: str
) -> Notification:
    """A suspension's review request, or its reminder or escalation (``review.deadline``)."""
    actions: list[dict[str, Any]] = [
        action.model_dump(mode="json", exclude={"args_schema"})
        for review in event.reviews
        for action in review.actions
    ]
    suffix, kind, deadline = channel, "review.requested", None
    if isinstance(event, ReviewDeadlineReached):
        suffix = f"{event.kind}:{channel}"
        kind, deadline = NOTIFICATION_TYPES[event.kind], event.expire_at
    return Notification(
        notification_id=f"{event.execution_id}:{event.suspension_id}:{suffix}",
        type=kind,
        deadline=deadline,
        project_id=event.project_id,
        workspace_id=event.workspace_id,
        execution_id=event.execution_id,
        agent=event.agent,
        suspension_id=event.suspension_id,
        suspend_context=event.suspend_context,
        allowed_decisions=None if actions else event.allowed_decisions,
        actions=actions,
        review_url=f"{review_page.rstrip('/')}/reviews#review={event.execution_id}",
    )


RUN_WEBHOOK_CHANNEL = "run-webhook"
"""The channel of runs' webhooks (services/notifier/channels/run_webhook.py)."""


def run_webhook_delivery(event: RunWebhookDue, public_url: str, now: datetime) -> Delivery:
    """The one delivery of a run's webhook: its id names the run, so the orchestrator's repeats
    of the event find it stored (``webhook-id`` is the same on every attempt)."""
    payload = event.payload
    notification = Notification(
        notification_id=f"{event.execution_id}:webhook:{event.epoch}",
        type="run.webhook",
        project_id=event.project_id,
        workspace_id=event.workspace_id,
        execution_id=event.execution_id,
        agent=str(payload.get("assistant_id", "")),
        suspension_id=event.epoch,
        review_url=f"{public_url.rstrip('/')}/reviews#review={event.execution_id}",
        webhook_url=event.url,
        run=dict(payload),
        created_at=event.occurred_at,
    )
    return Delivery(
        delivery_id=notification.notification_id,
        project_id=event.project_id,
        channel=RUN_WEBHOOK_CHANNEL,
        notification=notification,
        next_attempt_at=now,
    )


def retry_delay(attempts: int, rng: random.Random) -> timedelta:
    """Exponential backoff with full jitter (a random delay up to base * 2^(attempts-1), capped):
    replicas retrying a recovered endpoint do not all knock at the same second."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** max(attempts - 1, 0))
    return timedelta(seconds=rng.uniform(0.5, 1.0) * ceiling.total_seconds())


def after_attempt(
    delivery: Delivery,
    *,
    error: str | None,
    retryable: bool,
    now: datetime,
    max_attempts: int,
    rng: random.Random,
) -> Delivery:
    """The delivery once one more attempt has succeeded (error None) or failed."""
    attempts = delivery.attempts + 1
    if error is None:
        status = DeliveryStatus.DELIVERED
        next_at = delivery.next_attempt_at
    elif not retryable or attempts >= max_attempts:
        status = DeliveryStatus.DEAD
        next_at = delivery.next_attempt_at
        error = f"gave up after {attempts} attempt(s): {error}"
    else:
        status = DeliveryStatus.PENDING
        next_at = now + retry_delay(attempts, rng)
    return delivery.model_copy(
        update={
            "attempts": attempts,
            "status": status,
            "next_attempt_at": next_at,
            "last_error": error,
            "updated_at": now,
        }
    )
