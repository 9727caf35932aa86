"""The conversation invariant (8) flags what it must: pure, no cluster (the scenario that feeds
it is ``sigkill-during-conversations``, tests/chaos/scenarios.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.domain.threads import turn_execution_id
from shared.events import AgentInput, ThreadTurn
from tests.chaos.conversations import messages
from tests.chaos.invariants import (
    CONVERSATIONS,
    ConversationRecord,
    Observation,
    Verdict,
    check,
    expected_state,
)

IDS = [turn_execution_id("p", "w", "chat", turn) for turn in range(1, 6)]
T0 = datetime(2026, 12, 3, tzinfo=UTC)


def finished() -> ConversationRecord:
    record = ConversationRecord("p", "w", "chat", sent=messages(0), decisions={3: "approve"})
    record.accepted = [(turn, IDS[turn - 1]) for turn in range(1, 6)]
    record.finished = True
    record.listed = [(turn, IDS[turn - 1], "completed") for turn in range(5, 0, -1)]
    record.states = {turn: expected_state(record, turn) for turn in range(1, 6)}
    record.final = expected_state(record, 5)
    record.history = [10, 8, 6, 4, 2]
    return record


def turn(number: int, dispatched: float, ended: float) -> Execution:
    """Turn ``number``, dispatched and completed at those seconds past T0."""
    at = [T0 + timedelta(seconds=s) for s in (dispatched, ended)]
    return Execution(
        execution_id=IDS[number - 1],
        project_id="p",
        workspace_id="w",
        agent="conversation",
        input=AgentInput(message="m", turn=ThreadTurn(thread_id="chat", turn=number)),
        status=ExecutionStatus.COMPLETED,
        audit=[
            AuditEntry(at=at[0], actor="orchestrator", action="dispatched"),
            AuditEntry(
                at=at[0],
                actor="sandbox",
                action="transition",
                from_status=ExecutionStatus.PENDING,
                to_status=ExecutionStatus.RUNNING,
            ),
            AuditEntry(
                at=at[1],
                actor="sandbox",
                action="transition",
                from_status=ExecutionStatus.RUNNING,
                to_status=ExecutionStatus.COMPLETED,
            ),
        ],
    )


def verdict_of(
    record: ConversationRecord, executions: dict[str, Execution] | None = None
) -> Verdict:
    observation = Observation(
        executions=executions or {},
        http=[],
        effects=[],
        steps={},
        processes=[],
        faults_injected=0,
        tracked=set(),
        conversations=[record],
    )
    return check(observation)


def test_five_turns_once_each_in_order_pass() -> None:
    executions = {IDS[n - 1]: turn(n, 2 * n, 2 * n + 1) for n in range(1, 6)}
    verdict = verdict_of(finished(), executions)
    assert verdict.ok, verdict.violations


def test_a_turn_completed_on_the_state_before_it_is_lost() -> None:
    """Turn 2 reported completed with turn 1's state: its message and reply are gone, and turn 3
    answers without it."""
    record = finished()
    before = expected_state(record, 1)
    record.states[2] = before
    third = f"turn 2: you said {record.sent[2]!r}; before: {record.sent[:1]!r}"
    record.final = [*before, ("human", record.sent[2]), ("ai", f"{third}; reviewer said approve")]
    record.history = [4, 2]
    verdict = verdict_of(record)
    assert verdict.lost == 3  # turns 2, 4 and 5 completed, and are not in the thread's state
    found = " ".join(verdict.violations[CONVERSATIONS])
    assert "turn 2's state" in found and "turn 3's reply is not" in found


def test_a_reply_twice_is_a_duplicate_and_a_sixth_turn_too() -> None:
    record = finished()
    assert record.final is not None
    record.final = [*record.final, *record.final[-2:]]
    record.listed = [(6, turn_execution_id("p", "w", "chat", 6), "completed"), *record.listed]
    verdict = verdict_of(record)
    assert verdict.duplicated == 2, verdict.violations


def test_a_turn_left_waiting_is_stuck_and_a_missing_one_lost() -> None:
    record = finished()
    record.finished = False
    record.listed = [(4, IDS[3], "suspended"), *[t for t in record.listed if t[0] < 4]]
    record.final = expected_state(record, 3)
    record.history = [6, 4, 2]
    verdict = verdict_of(record)
    assert (verdict.stuck, verdict.lost) == (1, 1), verdict.violations


def test_turns_out_of_order_or_overlapping_fail() -> None:
    record = finished()
    record.accepted[3], record.accepted[4] = record.accepted[4], record.accepted[3]
    executions = {IDS[n - 1]: turn(n, 2 * n, 2 * n + 1) for n in range(1, 6)}
    executions[IDS[3]] = turn(4, 6.5, 9)  # dispatched before turn 3 ended (at 7 s)
    verdict = verdict_of(record, executions)
    found = " ".join(verdict.violations[CONVERSATIONS])
    assert "message 4 accepted as turn 5" in found and "two runs overlapped" in found
