"""What a reviewer is told about a suspension, and the record of delivering it on one channel.

Pure data (pydantic only): the notifier builds a ``Notification`` from ``execution.suspended``,
the store keeps one ``Delivery`` per (execution, suspension, channel), and the channel senders
turn a ``Notification`` into a webhook body, a Slack message or an email.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.events import utc_now


class Notification(BaseModel):
    """Everything a reviewer needs to act: what waits, where, what may be decided, by when."""

    model_config = ConfigDict(frozen=True)

    notification_id: str
    """``<execution_id>:<suspension_id>:<channel>``: the same on every redelivery (receivers
    deduplicate on it; it is the webhook's ``webhook-id``)."""
    type: str = "review.requested"
    project_id: str
    workspace_id: str
    execution_id: str
    agent: str
    suspension_id: int
    suspend_context: dict[str, Any] = Field(default_factory=dict)
    allowed_decisions: list[str] | None = None
    """One decision for the whole suspension (Atlas form), or None when each action has its
    own (``actions``)."""
    actions: list[dict[str, Any]] = Field(default_factory=list)
    """LangChain middleware suspensions: each pending tool call (name, args, description,
    allowed decisions)."""
    deadline: AwareDatetime | None = None
    review_url: str
    """The Pending Reviews page opened on this execution."""
    link_decisions: list[str] = Field(default_factory=list)
    """The decisions that get a link (channels configured with ``action_links = true``). Stored
    instead of the links themselves: a link decides, so it is minted per recipient when the
    notification is sent and never stored (shared/notifications/action_links.py)."""
    action_links: dict[str, str] = Field(default_factory=dict)
    """Decision -> a signed, expiring, single-use link that decides, for the one recipient this
    copy is sent to; set only on the copy a channel sends, never on a stored notification."""
    created_at: AwareDatetime = Field(default_factory=utc_now)
    webhook_url: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """``run.webhook`` only: the URL the run's request gave (the run webhook channel calls it;
    ``suspension_id`` is then the run's epoch)."""
    run: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    """``run.webhook`` only: the body LangGraph's server sends, but ``webhook_sent_at``. Both
    are left out of other notifications, whose webhook body is a contract
    (docs/notifications.md)."""


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"
    """Gave up after the last attempt; kept with the reason, listed by the API."""


class Delivery(BaseModel):
    """One notification on one channel, and how delivering it went."""

    model_config = ConfigDict(frozen=True)

    delivery_id: str
    """Equal to the notification's id: one delivery per (execution, suspension, channel)."""
    project_id: str
    channel: str
    notification: Notification
    status: DeliveryStatus = DeliveryStatus.PENDING
    attempts: int = 0
    """Attempts made so far."""
    next_attempt_at: AwareDatetime
    last_error: str | None = None
    updated_at: AwareDatetime = Field(default_factory=utc_now)
    trace_context: dict[str, str] | None = None
    """The W3C trace context of the handling that enqueued it: each attempt's span is its
    child, so a delivery shows in the execution's trace however late it is sent."""


class DeliveryFailed(Exception):
    """A channel could not deliver. ``retryable`` False: trying again cannot help (a 4xx other
    than 408/429, a malformed address), so the delivery goes dead at once."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
