"""Scheduled runs (LangGraph's crons): when a schedule's ticks fall, which tick a sweep fires,
and what is left of the ticks it finds missed. Pure, no I/O.

A schedule is a cron expression as LangGraph's server reads it (croniter: five fields, or six
with seconds last, as ``* * * * * */5``, every five seconds), in a time zone (IANA, UTC by
default). A cron's ``next_run_date`` is its first tick not yet fired. A sweep at ``now`` fires
at most one tick per cron (``tick_to_fire``): the latest one due, so a cron that missed ticks
while no orchestrator ran runs once for them (``catch_up="run_once"``, LangGraph's behaviour),
or not at all when the latest is older than the grace (``catch_up="skip"``). Every tick is fired
by whoever claims it first (an insert under the tick's id: shared/store/crons.py), so two sweeps
never fire one tick.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

CatchUp = Literal["run_once", "skip"]
"""What a cron does with ticks missed while no orchestrator ran: one run for them all (the
latest), or none (only a tick within ``grace`` of now runs)."""

CRON_NAMESPACE = uuid.UUID("5b7e3f0a-9d8c-4c1e-a2f4-6e1d9c3b7a55")
MAX_TICKS_WALKED = 10_000
"""The most ticks a sweep steps through to find the latest one due (a cron every second that
missed three hours); past it the walk restarts from now, which loses only missed ticks."""
MIN_INTERVAL = timedelta(seconds=1)


class InvalidSchedule(ValueError):
    """A schedule or time zone that cannot be read: the caller's mistake (a 422)."""


def checked_schedule(schedule: str, timezone: str | None = None) -> str:
    """``schedule`` once it reads as a cron expression (five fields, or six with seconds), in a
    time zone that exists; raises ``InvalidSchedule`` naming what is wrong."""
    fields = schedule.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(schedule):
        raise InvalidSchedule(
            f"schedule {schedule!r} is not a cron expression: five fields (minute hour"
            " day-of-month month day-of-week), or six with seconds last, as '* * * * * */5'"
            " (every five seconds)"
        )
    zone_of(timezone)
    return " ".join(fields)


def zone_of(timezone: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError, KeyError):
        raise InvalidSchedule(
            f"timezone {timezone!r} is not an IANA time zone (as 'America/New_York')"
        ) from None


def next_tick(schedule: str, after: datetime, timezone: str | None = None) -> datetime:
    """The schedule's first tick strictly after ``after``, in UTC."""
    local = after.astimezone(zone_of(timezone))
    following: datetime = croniter(schedule, local).get_next(datetime)
    return following.astimezone(UTC)


@dataclass(frozen=True)
class Firing:
    """What one sweep does with one due cron: the tick to fire (None: none), how many ticks it
    passes over unfired, and the cron's next tick after it."""

    tick: datetime | None
    skipped: int
    next_run_date: datetime


def tick_to_fire(
    schedule: str,
    next_run_date: datetime,
    now: datetime,
    *,
    timezone: str | None = None,
    catch_up: CatchUp = "run_once",
    grace: timedelta = timedelta(seconds=60),
    end_time: datetime | None = None,
) -> Firing:
    """The latest tick due at ``now`` from ``next_run_date`` on, and the cron's next tick."""
    if next_run_date > now:
        return Firing(None, 0, next_run_date)
    latest, walked = next_run_date, 0
    while True:
        following = next_tick(schedule, latest, timezone)
        if following > now:
            break
        latest, walked = following, walked + 1
        if walked >= MAX_TICKS_WALKED:
            # Too many missed to walk: what is missed is missed, the next tick is from now.
            latest, following = now, next_tick(schedule, now, timezone)
            break
    tick: datetime | None = latest
    if (end_time is not None and latest > end_time) or (
        catch_up == "skip" and now - latest > grace
    ):
        tick = None
    return Firing(tick, walked + (1 if tick is None else 0), following)


def tick_id(cron_id: str, tick: datetime) -> str:
    """The id of one tick of one cron: its claim's id, unique for ever."""
    return f"{cron_id}@{tick.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


def tick_thread_id(cron_id: str, tick: datetime) -> str:
    """The thread a stateless cron's tick runs on: the same for every attempt at the tick, so a
    tick fired again after a crash starts the same run, never a second one."""
    return str(uuid.uuid5(CRON_NAMESPACE, tick_id(cron_id, tick)))
