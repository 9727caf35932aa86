"""Issue 36, item 2: crons' schedules as LangGraph's server reads them, and which tick a sweep
fires (shared/domain/crons.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.crons import (
    InvalidSchedule,
    checked_schedule,
    next_tick,
    tick_id,
    tick_thread_id,
    tick_to_fire,
)

T0 = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
EVERY_5S = "* * * * * */5"


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "0 9 * * 1-5", EVERY_5S, " 0  9 * * * "])
def test_five_fields_or_six_with_seconds_are_schedules(schedule: str) -> None:
    assert checked_schedule(schedule) == " ".join(schedule.split())


@pytest.mark.parametrize("schedule", ["", "* * * *", "61 * * * *", "every day", "* * * * * * * *"])
def test_anything_else_is_refused_naming_the_form(schedule: str) -> None:
    with pytest.raises(InvalidSchedule, match="five fields"):
        checked_schedule(schedule)


def test_a_time_zone_must_exist_and_moves_the_ticks() -> None:
    with pytest.raises(InvalidSchedule, match="IANA"):
        checked_schedule("0 9 * * *", "Mars/Olympus")
    # 09:00 in New York on 2026-12-07 is 14:00 UTC (EST, UTC-5).
    assert next_tick("0 9 * * *", T0, "America/New_York") == datetime(2026, 12, 7, 14, tzinfo=UTC)
    assert next_tick("0 9 * * *", T0) == datetime(2026, 12, 8, 9, tzinfo=UTC)


def test_a_tick_is_strictly_after_the_time_given() -> None:
    assert next_tick(EVERY_5S, T0) == T0 + timedelta(seconds=5)
    assert next_tick(EVERY_5S, T0 + timedelta(seconds=4)) == T0 + timedelta(seconds=5)


def test_nothing_fires_before_the_next_run_date() -> None:
    firing = tick_to_fire(EVERY_5S, T0 + timedelta(seconds=5), T0)
    assert firing.tick is None and firing.skipped == 0
    assert firing.next_run_date == T0 + timedelta(seconds=5)


def test_an_on_time_sweep_fires_the_tick_and_moves_on_to_the_next() -> None:
    firing = tick_to_fire(EVERY_5S, T0, T0 + timedelta(seconds=1))
    assert firing.tick == T0 and firing.skipped == 0
    assert firing.next_run_date == T0 + timedelta(seconds=5)


def test_missed_ticks_run_once_by_default_or_not_at_all_when_skipped() -> None:
    late = T0 + timedelta(minutes=10, seconds=2)
    once = tick_to_fire(EVERY_5S, T0, late)
    assert once.tick == T0 + timedelta(minutes=10) and once.skipped == 120
    assert once.next_run_date == T0 + timedelta(minutes=10, seconds=5)
    # The latest is 2 s late: within the grace, so even "skip" fires it.
    assert tick_to_fire(EVERY_5S, T0, late, catch_up="skip").tick == once.tick
    daily = tick_to_fire("0 9 * * *", T0, T0 + timedelta(days=2), catch_up="skip")
    assert daily.tick is None and daily.skipped == 3
    assert daily.next_run_date == datetime(2026, 12, 10, 9, tzinfo=UTC)


def test_no_tick_fires_past_the_end_time() -> None:
    firing = tick_to_fire(
        EVERY_5S, T0, T0 + timedelta(seconds=11), end_time=T0 + timedelta(seconds=7)
    )
    assert firing.tick is None and firing.next_run_date == T0 + timedelta(seconds=15)


def test_a_ticks_ids_are_the_same_on_every_attempt_and_differ_per_tick() -> None:
    assert tick_id("c1", T0) == "c1@2026-12-07T12:00:00.000000Z"
    assert tick_thread_id("c1", T0) == tick_thread_id("c1", T0.astimezone(UTC))
    assert tick_thread_id("c1", T0) != tick_thread_id("c1", T0 + timedelta(seconds=5))
    assert tick_thread_id("c1", T0) != tick_thread_id("c2", T0)
