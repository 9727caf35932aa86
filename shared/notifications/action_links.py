"""Signed, expiring approve / reject links for notifications (``INTERLOCK_ACTION_LINK_SECRET``).

A link carries one decision for one suspension (its generation), signed with a secret the
notifier and the gateway share (itsdangerous: HMAC-SHA256 with a timestamp). It expires at the
earlier of ``LINK_TTL`` and the suspension's expiry. It is single-use by construction: the
decision it submits takes the suspension's one decision claim, so a second use (the same link
or another of the same suspension) finds it decided, and a later suspension has another
generation. Following a link only shows a confirmation page; the decision is submitted by the
page's form (POST): mail scanners that fetch links must not decide anything.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from pydantic import BaseModel, ConfigDict, ValidationError

from shared.events import utc_now

LINK_TTL = timedelta(days=7)
SALT = "interlock.action-link.v1"


class ActionLink(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    project_id: str
    workspace_id: str
    execution_id: str
    generation: int
    decision: str
    channel: str
    """Who was sent the link: the audit trail names the decision's reviewer after it."""
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


def links_for(
    *,
    project_id: str,
    workspace_id: str,
    execution_id: str,
    generation: int,
    decisions: list[str],
    channel: str,
    expire_at: datetime | None,
    secret: str,
    base_url: str,
    now: datetime | None = None,
) -> dict[str, str]:
    """One link per decision, each to ``<base_url>/act/<token>``."""
    issued = now or utc_now()
    expires = issued + LINK_TTL if expire_at is None else min(issued + LINK_TTL, expire_at)
    return {
        decision: f"{base_url.rstrip('/')}/act/"
        + sign(
            ActionLink(
                project_id=project_id,
                workspace_id=workspace_id,
                execution_id=execution_id,
                generation=generation,
                decision=decision,
                channel=channel,
                expires_at=expires,
            ),
            secret,
        )
        for decision in decisions
    }


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=SALT)
