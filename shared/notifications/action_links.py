"""Signed, expiring, single-use approve / reject links for notifications
(``INTERLOCK_ACTION_LINK_SECRET``).

A link carries one decision for one suspension (its generation), on behalf of the one recipient
it was sent to (``recipient``: an identity of shared/domain/principals.py, ``person:<email>`` for
an email recipient, ``group:slack:<channel>`` for a Slack channel), signed with a secret the
notifier and the gateway share (itsdangerous: HMAC-SHA256 with a timestamp). It expires at the
earlier of ``LINK_TTL`` and the suspension's expiry. Separation of duties applies to the
recipient exactly as to an API key's holder (services/gateway/intake.py).

Links are minted when a notification is sent, never stored: the stored delivery names only the
decisions that get links, so the database holds nothing that decides. Each link has a random
``link_id``; the gateway spends it on the first POST, whatever the outcome
(shared/store/links.py), so a link decides at most once. Following a link only shows a
confirmation page; the decision is submitted by the page's form (POST): mail scanners that fetch
links must not decide anything.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime, timedelta

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from pydantic import BaseModel, ConfigDict, ValidationError

from shared.events import utc_now
from shared.notifications.model import Notification

LINK_TTL = timedelta(days=7)
SALT = "interlock.action-link.v2"
"""v2 added the recipient and the link id: a v1 link (neither) no longer verifies."""


class ActionLink(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    link_id: str
    """Random: spent on first use."""
    project_id: str
    workspace_id: str
    execution_id: str
    generation: int
    decision: str
    channel: str
    recipient: str
    """Who the link was sent to: the decision is theirs (shared/domain/principals.py)."""
    expires_at: datetime


class LinkInvalid(Exception):
    """Tampered, from another deployment's secret, or malformed."""


class LinkExpired(Exception):
    pass


def sign(link: ActionLink, secret: str) -> str:
    return str(_serializer(secret).dumps(link.model_dump(mode="json")))


def verify(token: str, secret: str, *, now: datetime | None = None) -> ActionLink:
    """The link a token carries; raises LinkInvalid or LinkExpired."""
    try:
        raw = _serializer(secret).loads(token, max_age=int(LINK_TTL.total_seconds()))
        link = ActionLink.model_validate(raw)
    except SignatureExpired as exc:
        raise LinkExpired("this link has expired") from exc
    except (BadSignature, ValidationError) as exc:
        raise LinkInvalid("this link is not valid (altered or from another deployment)") from exc
    if (now or utc_now()) >= link.expires_at:
        raise LinkExpired("this link has expired")
    return link


class LinkMinter:
    """Makes a notification's links for one recipient at send time (a channel with
    ``action_links = true`` holds one)."""

    def __init__(
        self, *, secret: str, base_url: str, clock: Callable[[], datetime] = utc_now
    ) -> None:
        self._secret = secret
        self._base_url = base_url.rstrip("/")
        self._clock = clock

    def links(self, notification: Notification, *, channel: str, recipient: str) -> dict[str, str]:
        """Decision -> ``<base_url>/act/<token>`` for each of ``notification.link_decisions``."""
        issued = self._clock()
        expire_at = notification.deadline
        expires = issued + LINK_TTL if expire_at is None else min(issued + LINK_TTL, expire_at)
        return {
            decision: f"{self._base_url}/act/"
            + sign(
                ActionLink(
                    link_id=secrets.token_urlsafe(16),
                    project_id=notification.project_id,
                    workspace_id=notification.workspace_id,
                    execution_id=notification.execution_id,
                    generation=notification.suspension_id,
                    decision=decision,
                    channel=channel,
                    recipient=recipient,
                    expires_at=expires,
                ),
                self._secret,
            )
            for decision in notification.link_decisions
        }

    def with_links(
        self, notification: Notification, *, channel: str, recipient: str
    ) -> Notification:
        """The notification as ``recipient`` is sent it: with their links (none to make: as is)."""
        if not notification.link_decisions:
            return notification
        links = self.links(notification, channel=channel, recipient=recipient)
        return notification.model_copy(update={"action_links": links})


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=SALT)
