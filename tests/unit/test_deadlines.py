"""Deadlines: the rules, and the sweeper firing remind, escalate and expire once each, over the
four services' handlers in one process with an injected clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agents.ledger import read_all
from shared.domain.deadlines import DeadlineKind, DeadlineRules
from shared.domain.execution import ExecutionStatus
from tests.unit.inprocess import World

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("90m", timedelta(minutes=90)), ("4h", 4 * HOUR), ("2d", timedelta(days=2)),
     ("1h30m", timedelta(minutes=90)), (3600, HOUR), ("none", None)],
)  # fmt: skip
def test_durations_read_as_people_write_them(text: Any, expected: timedelta | None) -> None:
    assert DeadlineRules(expire_after=text).expire_after == expected


@pytest.mark.parametrize("bad", ["4 hours", "h4", "-1h", "4x", ""])
def test_a_duration_that_does_not_parse_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        DeadlineRules(remind_after=bad)


def test_deadlines_are_absolute_and_due_in_order() -> None:
    rules = DeadlineRules(remind_after="1h", escalate_after="2h", expire_after="3h")
    deadlines = rules.deadlines_from(T0)
    assert (deadlines.remind_at, deadlines.escalate_at, deadlines.expire_at) == (
        T0 + HOUR,
        T0 + 2 * HOUR,
        T0 + 3 * HOUR,
    )
    assert deadlines.due(T0) == []
    assert deadlines.due(T0 + 3 * HOUR) == list(DeadlineKind)
    fired = deadlines.with_fired(DeadlineKind.REMIND)
    assert fired.due(T0 + 2 * HOUR) == [DeadlineKind.ESCALATE]
    assert fired.next_at() == T0 + 2 * HOUR
    assert DeadlineRules(expire_after="none").deadlines_from(T0).next_at() is None


async def suspended_refund(world: World) -> str:
    world.set_clock(T0)
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    execution = await world.execution(started.execution_id)
    assert execution.status is ExecutionStatus.SUSPENDED and execution.suspension
    deadlines = execution.suspension.deadlines
    assert deadlines is not None and deadlines.remind_at == T0 + 4 * HOUR  # the agents file
    return started.execution_id


async def test_remind_escalate_and_expire_fire_once_each(world: World) -> None:
    seen = world.deadline_events
    execution_id = await suspended_refund(world)

    world.set_clock(T0 + 3 * HOUR)
    assert await world.sweeper.sweep() == 0
    world.set_clock(T0 + 5 * HOUR)
    assert await world.sweeper.sweep() == 1
    assert await world.sweeper.sweep() == 0  # fired already
    assert [(e["kind"], e["event_id"]) for e in seen] == [("remind", f"{execution_id}:1:remind")]
    assert seen[0]["suspend_context"]["claim_id"] == "CLM-4821"

    world.set_clock(T0 + 30 * HOUR)
    assert await world.sweeper.sweep() == 1
    assert [e["kind"] for e in seen] == ["remind", "escalate"]
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED

    world.set_clock(T0 + 49 * HOUR)
    assert await world.sweeper.sweep() == 1
    expired = await world.execution(execution_id)
    assert expired.status is ExecutionStatus.EXPIRED
    assert await world.sweeper.sweep() == 0
    actions = [(a.actor, a.action, a.to_status) for a in expired.audit]
    assert ("system:deadlines", "deadline.remind", None) in actions
    assert ("system:deadlines", "deadline.escalate", None) in actions
    assert actions[-1] == ("system:deadlines", "transition", ExecutionStatus.EXPIRED)
    assert read_all(world.ledger) == []  # nothing was refunded
    with pytest.raises(Exception, match="expired"):
        await world.decide(execution_id, "approve")


async def test_deadlines_missed_while_down_fire_at_the_first_sweep_in_order(
    world: World,
) -> None:
    seen = world.deadline_events
    execution_id = await suspended_refund(world)
    world.set_clock(T0 + 100 * HOUR)  # every replica was down for four days
    assert await world.sweeper.sweep() == 3
    assert [e["kind"] for e in seen] == ["remind", "escalate"]
    assert (await world.execution(execution_id)).status is ExecutionStatus.EXPIRED


async def test_two_sweepers_at_once_fire_each_deadline_once(world: World) -> None:
    seen = world.deadline_events
    ids = [await suspended_refund(world) for _ in range(3)]
    world.set_clock(T0 + 5 * HOUR)
    fired = await asyncio.gather(world.sweeper.sweep(), world.sweeper.sweep())
    assert sum(fired) == 3
    for execution_id in ids:
        execution = await world.execution(execution_id)
        audit = [a.action for a in execution.audit]
        assert audit.count("deadline.remind") == 1
    # Both may have published before one recorded it: the same event id, which consumers
    # deduplicate (the notifier keys its deliveries by it).
    assert {e["event_id"] for e in seen} == {f"{i}:1:remind" for i in ids}


async def test_a_declared_default_decision_is_taken_by_the_system(world: World) -> None:
    world.set_clock(T0)
    started = await world.invoke("high-value-refund", "Refund claim CLM-4821")
    world.set_clock(T0 + 73 * HOUR)
    assert await world.sweeper.sweep() == 1
    done = await world.execution(started.execution_id)
    assert done.status is ExecutionStatus.COMPLETED
    assert done.result["outcome"] == "rejected"
    [decision] = done.decisions
    assert (decision.decision, decision.reviewer) == ("reject", "system:deadlines")
    assert read_all(world.ledger)[-1]["kind"] == "rejection"


async def test_a_reviewers_decision_is_never_overruled_by_the_expiry(world: World) -> None:
    execution_id = await suspended_refund(world)
    await world.decide(execution_id, "approve", "just in time")
    world.set_clock(T0 + 49 * HOUR)
    assert await world.sweeper.sweep() == 0
    done = await world.execution(execution_id)
    assert done.status is ExecutionStatus.COMPLETED and done.result["outcome"] == "refunded"
