"""The pure rules of a thread's turns (shared/domain/threads.py): their keys, where a new input
goes under each busy-thread policy, and which turns left a state to start from."""

from __future__ import annotations

import pytest

from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.domain.threads import (
    ThreadBusy,
    has_run,
    left_state,
    plan_turn,
    thread_of_key,
    turn_execution_id,
    turn_key,
)
from shared.events import ThreadTurn
from tests import factories as f


def turn(
    number: int, status: ExecutionStatus, *, ran: bool = True, base: str | None = None
) -> Execution:
    audit = [AuditEntry(actor="orchestrator", action="dispatched")] if ran else []
    execution = f.pending(f"turn-{number}")
    given = execution.input.model_copy(
        update={"turn": ThreadTurn(thread_id="t", turn=number, base=base)}
    )
    return execution.model_copy(update={"status": status, "input": given, "audit": audit})


def test_turn_keys_keep_the_first_turn_as_threads_had_it_and_name_their_thread() -> None:
    assert turn_key("t-1", 1) == "langgraph-thread:t-1"
    assert turn_key("t-1", 12) == "langgraph-thread:t-1#12"
    assert [thread_of_key(turn_key("t-1", n)) for n in (1, 2, 30)] == ["t-1"] * 3
    assert thread_of_key("my-own-key") is None and thread_of_key(None) is None
    ids = {turn_execution_id("p", "w", "t", n) for n in range(1, 50)}
    assert len(ids) == 49
    assert turn_execution_id("p", "w", "t", 2) != turn_execution_id("p", "w2", "t", 2)
    with pytest.raises(ValueError):
        turn_key("t", 0)


def test_a_new_input_goes_after_the_latest_turn_by_its_policy() -> None:
    assert plan_turn(None, "reject").turn == 1
    done = turn(2, ExecutionStatus.COMPLETED, base="turn-1")
    for policy in ("reject", "enqueue", "interrupt", "rollback"):
        plan = plan_turn(done, policy)  # type: ignore[arg-type]
        assert (plan.turn, plan.after, plan.base, plan.cancels) == (3, "turn-2", "turn-2", None)
    for status in (ExecutionStatus.RUNNING, ExecutionStatus.SUSPENDED, ExecutionStatus.PENDING):
        busy = turn(2, status, base="turn-1")
        with pytest.raises(ThreadBusy):
            plan_turn(busy, "reject")
        queued = plan_turn(busy, "enqueue")
        assert (queued.after, queued.base, queued.cancels) == ("turn-2", "turn-2", None)
        interrupted = plan_turn(busy, "interrupt")
        assert (interrupted.base, interrupted.cancels) == ("turn-2", busy)
        rolled_back = plan_turn(busy, "rollback")
        assert (rolled_back.base, rolled_back.cancels) == ("turn-1", busy)


def test_a_turn_left_a_state_unless_it_never_stopped_before_it_was_cancelled() -> None:
    assert left_state(turn(1, ExecutionStatus.COMPLETED))
    assert left_state(turn(1, ExecutionStatus.SUSPENDED))
    assert not left_state(turn(1, ExecutionStatus.CANCELLED, ran=False))
    assert not has_run(turn(1, ExecutionStatus.CANCELLED, ran=False))
    cancelled_running = turn(1, ExecutionStatus.CANCELLED)
    assert has_run(cancelled_running) and not left_state(cancelled_running)
    suspended_once = cancelled_running.model_copy(
        update={
            "audit": [
                *cancelled_running.audit,
                AuditEntry(actor="o", action="transition", to_status=ExecutionStatus.SUSPENDED),
            ]
        }
    )
    assert left_state(suspended_once)
