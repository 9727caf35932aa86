"""Deadlines of a suspension: remind after X, escalate after Y, expire after Z. Pure.

The rules come from the agent's ``[agents.NAME.deadlines]`` table; when an execution suspends,
the orchestrator turns them into absolute times stored with the suspension, so a restart, a
new replica or a changed agents file never moves a deadline already given. A sweeper fires
what is due (see services/orchestrator/deadlines.py); each kind fires once per suspension.

    [agents.refund-approval.deadlines]
    remind_after = "4h"
    escalate_after = "24h"
    escalate_to = ["ops-webhook"]     # channels of the notifications file
    expire_after = "48h"              # the default; "none" never expires
    on_expiry = "cancel"              # or a decision the agent allows, e.g. "reject"
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

_DURATION = re.compile(r"(?P<amount>\d+)\s*(?P<unit>[smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
DEFAULT_EXPIRY = timedelta(hours=48)
CANCEL = "cancel"


class DeadlineKind(StrEnum):
    REMIND = "remind"
    ESCALATE = "escalate"
    EXPIRE = "expire"


def _duration(value: Any) -> Any:
    """``"90m"``, ``"4h"``, ``"2d"``, ``"1h30m"``, seconds as a number, or ``"none"``."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "none":
            return None
        parts = list(_DURATION.finditer(text))
        if not parts or "".join(p.group(0) for p in parts).replace(" ", "") != text.replace(
            " ", ""
        ):
            raise ValueError(f"{value!r} is not a duration like '30m', '4h' or '2d'")
        return sum((timedelta(**{_UNITS[p["unit"]]: int(p["amount"])}) for p in parts), timedelta())
    return value


Duration = Annotated[timedelta | None, BeforeValidator(_duration)]


class DeadlineRules(BaseModel):
    """``[agents.NAME.deadlines]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    remind_after: Duration = None
    escalate_after: Duration = None
    expire_after: Duration = DEFAULT_EXPIRY
    on_expiry: str = Field(default=CANCEL, min_length=1)
    """``cancel`` (the execution ends ``expired``) or a decision taken by the system."""
    escalate_to: list[str] = Field(default_factory=list)
    """Channels told on escalation (empty: the channels told of the suspension)."""

    def deadlines_from(self, suspended_at: datetime) -> Deadlines:
        def at(after: timedelta | None) -> datetime | None:
            return None if after is None else suspended_at + after

        return Deadlines(
            remind_at=at(self.remind_after),
            escalate_at=at(self.escalate_after),
            expire_at=at(self.expire_after),
            on_expiry=self.on_expiry,
            escalate_to=self.escalate_to,
        )


class Deadlines(BaseModel):
    """Absolute deadlines of one suspension and which have fired."""

    model_config = ConfigDict(frozen=True)

    remind_at: datetime | None = None
    escalate_at: datetime | None = None
    expire_at: datetime | None = None
    on_expiry: str = CANCEL
    escalate_to: list[str] = Field(default_factory=list)
    fired: list[DeadlineKind] = Field(default_factory=list)

    def _at(self, kind: DeadlineKind) -> datetime | None:
        return {
            DeadlineKind.REMIND: self.remind_at,
            DeadlineKind.ESCALATE: self.escalate_at,
            DeadlineKind.EXPIRE: self.expire_at,
        }[kind]

    def due(self, now: datetime) -> list[DeadlineKind]:
        """Unfired kinds whose time has come, in the order remind, escalate, expire."""
        return [
            kind
            for kind in DeadlineKind
            if kind not in self.fired and (at := self._at(kind)) is not None and at <= now
        ]

    def next_at(self) -> datetime | None:
        """When the next unfired deadline comes (None: nothing left to fire)."""
        pending = [at for kind in DeadlineKind if kind not in self.fired and (at := self._at(kind))]
        return min(pending, default=None)

    def with_fired(self, kind: DeadlineKind) -> Deadlines:
        return self.model_copy(update={"fired": [*self.fired, kind]})
