"""The orchestrator's state machine, event by event, with no I/O."""

import pytest

from services.orchestrator import state_machine as sm
from shared.domain.decisions import DecisionNotAllowed, NotSuspended
from shared.domain.execution import Execution
from shared.domain.execution import ExecutionStatus as S
from shared.events import DispatchKind, ExecutionFailure, PendingInterrupt, ReportOutcome
from tests import factories as f


def dispatched() -> sm.Execution:
    execution = f.pending()
    return sm.on_requested(execution, f.requested()).execution


def test_request_gives_the_first_epoch_once_and_asks_for_a_start() -> None:
    execution = dispatched()
    assert (execution.status, execution.epoch) == (S.PENDING, 1)
    assert [a.action for a in execution.audit] == ["created", "dispatched"]
    [command] = sm.follow_ups(execution, causation_id=None)
    assert command.kind is DispatchKind.START and command.epoch == 1
    again = sm.on_requested(execution, f.requested())
    assert again.ignored and not again.changed and again.execution is execution


def test_full_lifecycle_with_one_suspension() -> None:
    execution = dispatched()
    execution = sm.on_started(execution, f.report(execution, ReportOutcome.STARTED)).execution
    assert execution.status is S.RUNNING
    outcome = sm.on_suspended(execution, f.suspended_event(execution))
    execution = outcome.execution
    assert execution.status is S.SUSPENDED
    assert execution.suspension is not None and execution.suspension.suspension_id == 1
    assert sm.follow_ups(execution, causation_id=None) == []

    outcome = sm.on_decision(execution, f.decision(execution, "Approve", reviewer_notes="ok"))
    execution = outcome.execution
    assert (execution.status, execution.epoch) == (S.RESUMING, 2)
    assert execution.last_decision is not None and execution.last_decision.decision == "approve"
    [command] = sm.follow_ups(execution, causation_id=None)
    assert command.kind is DispatchKind.RESUME and command.epoch == 2
    assert command.resume is not None and command.resume.interrupt_ids == ["int-1"]
    assert command.resume.resume_values() == {
        "int-1": {"decision": "approve", "reviewer_notes": "ok"}
    }

    execution = sm.on_started(execution, f.report(execution, ReportOutcome.STARTED)).execution
    execution = sm.on_finished(
        execution, f.report(execution, ReportOutcome.COMPLETED, result={"outcome": "refunded"})
    ).execution
    assert execution.status is S.COMPLETED and execution.result == {"outcome": "refunded"}
    transitions = [
        (a.from_status, a.to_status) for a in execution.audit if a.action == "transition"
    ]
    assert transitions == [
        (S.PENDING, S.RUNNING),
        (S.RUNNING, S.SUSPENDED),
        (S.SUSPENDED, S.RESUMING),
        (S.RESUMING, S.RUNNING),
        (S.RUNNING, S.COMPLETED),
    ]


def test_the_stored_suspension_keeps_the_raw_interrupts_and_the_state_values() -> None:
    execution = dispatched()
    interrupts = [
        PendingInterrupt(interrupt_id="int-a", value="Send the refund?"),
        PendingInterrupt(interrupt_id="int-b", value={"claim_id": "CLM-4821"}),
    ]
    values = {"messages": [{"role": "user", "content": "CLM-4821"}], "claim_id": "CLM-4821"}
    event = f.suspended_event(execution).model_copy(
        update={"interrupts": interrupts, "values": values, "next": ["review"]}
    )
    suspension = sm.on_suspended(execution, event).execution.suspension
    assert suspension is not None
    # As the graph reported them: neither wrapped (suspend_context's view) nor reordered.
    assert suspension.interrupts == interrupts
    assert suspension.interrupt_ids == ["int-a", "int-b"]
    assert suspension.values == values
    assert suspension.next == ["review"]


def test_a_suspension_stored_before_interrupts_and_values_were_recorded_still_loads() -> None:
    stored = f.suspended().model_dump(mode="json")
    assert stored["suspension"] is not None
    del stored["suspension"]["interrupts"], stored["suspension"]["values"]
    old = Execution.model_validate(stored)
    assert old.suspension is not None
    assert (old.suspension.interrupts, old.suspension.values) == ([], None)
    assert old.suspension.interrupt_ids == ["int-1"]


def test_suspension_seen_before_its_started_report_implies_running() -> None:
    execution = dispatched()
    outcome = sm.on_suspended(execution, f.suspended_event(execution))
    assert [(t.from_status, t.to_status) for t in outcome.transitions] == [
        (S.PENDING, S.RUNNING),
        (S.RUNNING, S.SUSPENDED),
    ]
    late_start = sm.on_started(outcome.execution, f.report(execution, ReportOutcome.STARTED))
    assert late_start.ignored and late_start.execution is outcome.execution


def test_reports_from_another_epoch_change_nothing() -> None:
    execution = dispatched()
    stale = f.report(execution, ReportOutcome.COMPLETED).model_copy(update={"epoch": 5})
    outcome = sm.on_finished(execution, stale)
    assert outcome.ignored and "stale" in outcome.ignored and outcome.execution is execution


def test_duplicate_suspension_is_ignored() -> None:
    execution = dispatched()
    event = f.suspended_event(execution)
    once = sm.on_suspended(execution, event).execution
    twice = sm.on_suspended(once, event)
    assert twice.ignored and twice.execution is once


def test_same_decision_redelivered_is_a_no_op_and_still_asks_for_the_resume() -> None:
    execution = sm.on_suspended(dispatched(), f.suspended_event(dispatched())).execution
    event = f.decision(execution)
    resumed = sm.on_decision(execution, event).execution
    again = sm.on_decision(resumed, event)
    assert again.ignored and again.execution is resumed
    assert sm.follow_ups(resumed, causation_id=None)[0].kind is DispatchKind.RESUME


def test_invalid_decisions_raise_and_can_be_audited() -> None:
    execution = sm.on_suspended(dispatched(), f.suspended_event(dispatched())).execution
    with pytest.raises(DecisionNotAllowed):
        sm.on_decision(execution, f.decision(execution, "maybe"))
    with pytest.raises(NotSuspended):
        sm.on_decision(dispatched(), f.decision(execution))
    event = f.decision(execution, "maybe")
    audited = sm.rejected_decision(execution, event, "not allowed")
    assert audited.status is S.SUSPENDED and len(audited.audit) == len(execution.audit) + 1
    assert audited.audit[-1].action == "decision.rejected"


def test_failure_records_the_error() -> None:
    execution = dispatched()
    failure = ExecutionFailure(error_type="ClaimNotFound", message="claim CLM-0 does not exist")
    outcome = sm.on_finished(execution, f.report(execution, ReportOutcome.FAILED, error=failure))
    assert outcome.execution.status is S.ERROR
    assert outcome.execution.error == {
        "error_type": "ClaimNotFound",
        "message": "claim CLM-0 does not exist",
    }


def test_terminal_states_have_no_way_out() -> None:
    for terminal in (S.COMPLETED, S.ERROR):
        execution = f.pending().model_copy(update={"status": terminal})
        for target in S:
            with pytest.raises(sm.IllegalTransition):
                sm.transition(execution, target, actor="test")


def test_many_suspensions_in_a_row() -> None:
    execution = dispatched()
    for round_ in range(1, 6):
        execution = sm.on_suspended(execution, f.suspended_event(execution)).execution
        assert execution.suspension is not None and execution.suspension.suspension_id == round_
        execution = sm.on_decision(execution, f.decision(execution)).execution
        execution = sm.on_started(execution, f.report(execution, ReportOutcome.STARTED)).execution
    assert execution.epoch == 6 and len(execution.decisions) == 5


def test_an_earlier_decision_redelivered_after_a_later_suspension_is_a_no_op() -> None:
    execution = sm.on_suspended(dispatched(), f.suspended_event(dispatched())).execution
    first = f.decision(execution)
    execution = sm.on_decision(execution, first).execution
    execution = sm.on_suspended(execution, f.suspended_event(execution)).execution
    again = sm.on_decision(execution, first)
    assert again.ignored == "decision already applied" and again.execution is execution


def test_a_decision_for_the_suspension_in_flight_is_parked_then_applied() -> None:
    running = sm.on_started(dispatched(), f.report(dispatched(), ReportOutcome.STARTED)).execution
    early = f.decision(running, "APPROVE", suspension_id=1)
    parked = sm.on_decision(running, early)
    assert parked.claim == 1 and not parked.transitions
    assert parked.execution.status is S.RUNNING and parked.execution.parked_decision is not None
    assert sm.on_decision(parked.execution, early).ignored == "decision already applied"

    outcome = sm.on_suspended(parked.execution, f.suspended_event(parked.execution))
    assert [t.to_status for t in outcome.transitions] == [S.SUSPENDED, S.RESUMING]
    resumed = outcome.execution
    assert resumed.parked_decision is None and resumed.epoch == 2
    assert [(d.decision, d.suspension_id) for d in resumed.decisions] == [("approve", 1)]
    [command] = sm.follow_ups(resumed, causation_id=None)
    assert command.kind is DispatchKind.RESUME


def test_a_parked_decision_that_the_suspension_does_not_allow_is_rejected_in_the_audit() -> None:
    running = dispatched()
    parked = sm.on_decision(running, f.decision(running, "escalate", suspension_id=1)).execution
    outcome = sm.on_suspended(parked, f.suspended_event(parked))
    assert outcome.execution.status is S.SUSPENDED and outcome.execution.parked_decision is None
    assert outcome.execution.audit[-1].action == "decision.rejected"
    assert "allowed decisions: approve, reject" in str(outcome.execution.audit[-1].reason)


def test_a_parked_decision_is_dropped_when_the_attempt_ends_without_suspending() -> None:
    running = dispatched()
    parked = sm.on_decision(running, f.decision(running, "approve", suspension_id=1)).execution
    done = sm.on_finished(parked, f.report(parked, ReportOutcome.COMPLETED, result=1)).execution
    assert done.status is S.COMPLETED and done.parked_decision is None
    assert "without suspending" in str(done.audit[-1].reason)


def test_a_decision_without_suspension_id_is_not_parked() -> None:
    with pytest.raises(NotSuspended):
        sm.on_decision(dispatched(), f.decision(dispatched()))


def test_cancel_stops_the_execution_and_its_running_attempt_goes_stale() -> None:
    from shared.events import CancelRequested

    execution = sm.on_started(dispatched(), f.report(dispatched(), ReportOutcome.STARTED)).execution
    cancel = CancelRequested(execution_id=execution.execution_id, reason="withdrawn", **f.SCOPE)
    outcome = sm.on_cancel(execution, cancel)
    cancelled = outcome.execution
    assert cancelled.status is S.CANCELLED and cancelled.status.is_terminal
    assert cancelled.epoch == execution.epoch + 1
    assert outcome.transitions[0].reason == "withdrawn"
    late = sm.on_finished(cancelled, f.report(execution, ReportOutcome.COMPLETED, result=1))
    assert late.ignored and late.execution is cancelled
    assert sm.on_cancel(cancelled, cancel).ignored == "already cancelled"
    assert sm.follow_ups(cancelled, causation_id=None) == []
    done = f.pending().model_copy(update={"status": S.COMPLETED})
    with pytest.raises(sm.AlreadyFinished, match="already completed"):
        sm.on_cancel(done, cancel)
