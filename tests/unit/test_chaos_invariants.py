"""The chaos suite's invariant checker flags what it must (pure: no cluster needed)."""

from __future__ import annotations

from services.orchestrator import state_machine as sm
from shared.domain.execution import Execution
from tests import factories as f
from tests.chaos.invariants import EffectCall, HttpRecord, Observation, ProcessStats, check


def outreach_suspended() -> Execution:
    execution = f.pending("e1").model_copy(update={"agent": "outreach"})
    execution = sm.on_requested(execution, f.requested("e1")).execution
    return sm.on_suspended(execution, f.suspended_event(execution)).execution


def observation(execution: Execution, **changes: object) -> Observation:
    base = Observation(
        executions={execution.execution_id: execution},
        http=[HttpRecord("POST", "/invoke", 202, "application/json", execution_id="e1")],
        effects=[EffectCall("e1:send_email:aa", True)],
        steps={"e1": ["e1:send_email:aa"]},
        processes=[ProcessStats("sandbox", 0, 200.0)],
        faults_injected=0,
        tracked={"e1"},
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def test_a_clean_run_passes() -> None:
    verdict = check(observation(outreach_suspended()))
    assert verdict.ok, verdict.violations
    assert (verdict.lost, verdict.duplicated, verdict.stuck, verdict.server_errors) == (0, 0, 0, 0)


def test_an_accepted_decision_that_was_never_applied_is_lost() -> None:
    accepted = HttpRecord(
        "POST", "/resume", 202, "application/json", execution_id="e1", generation=1, decision="x"
    )
    verdict = check(observation(outreach_suspended(), http=[accepted]))
    assert verdict.lost == 1 and "1.no-loss" in verdict.violations


def test_an_effect_under_a_new_key_is_a_duplicate() -> None:
    effects = [EffectCall("e1:send_email:aa", True), EffectCall("e1:send_email:bb", True)]
    verdict = check(observation(outreach_suspended(), effects=effects))
    assert verdict.duplicated == 1 and "2.no-duplicate-effect" in verdict.violations


def test_a_run_under_way_may_have_sent_the_email_of_a_suspension_not_recorded_yet() -> None:
    """Resumed after suspension 1, it sent suspension 2's email before the checker looked: not a
    duplicate (it is counted as stuck if it stays so), but a third key is."""
    suspended = outreach_suspended()
    execution = sm.on_decision(suspended, f.decision(suspended)).execution
    assert execution.status.value == "resuming"
    two = [EffectCall("e1:send_email:aa", True), EffectCall("e1:send_email:bb", True)]
    steps = {"e1": ["e1:send_email:aa", "e1:send_email:bb"]}
    verdict = check(observation(execution, effects=two, steps=steps))
    assert verdict.duplicated == 0, verdict.violations
    three = [*two, EffectCall("e1:send_email:cc", True)]
    steps = {"e1": [c.key for c in three]}
    verdict = check(observation(execution, effects=three, steps=steps))
    assert verdict.duplicated == 1 and "2.no-duplicate-effect" in verdict.violations


def test_running_at_the_end_is_stuck_and_a_500_counts() -> None:
    running = sm.on_requested(f.pending("e1"), f.requested("e1")).execution
    http = [HttpRecord("GET", "/x", 500, "application/problem+json")]
    verdict = check(observation(running, http=http, effects=[], steps={}))
    assert verdict.stuck == 1 and verdict.server_errors == 1


def test_a_503_with_retry_after_is_allowed_a_plain_4xx_is_not() -> None:
    http = [
        HttpRecord("POST", "/invoke", 503, "application/problem+json", retry_after="5"),
        HttpRecord("POST", "/invoke", 400, "text/plain"),
    ]
    verdict = check(observation(outreach_suspended(), http=http))
    assert verdict.unavailable == 1 and verdict.server_errors == 0
    assert "7.clear-errors" in verdict.violations


def test_restarts_beyond_the_faults_injected_are_a_crash_loop() -> None:
    processes = [ProcessStats("orchestrator", 3, 150.0)]
    verdict = check(observation(outreach_suspended(), processes=processes, faults_injected=1))
    assert "6.bounded-resources" in verdict.violations
