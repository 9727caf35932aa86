"""Property-based test of the orchestrator's state machine: random interleavings of events,
redeliveries, competing and early decisions, cancellations and crashes, with the invariants
checked after every step and liveness checked at the end.

The harness plays the orchestrator's handler (load, apply the pure state machine, take the
decision claim, store, publish the follow-ups) and a sandbox whose agent suspends ``stages``
times; every message stays deliverable forever (at-least-once delivery), and a handler may crash
before its write or between its write and its publishes. The seed is printed on failure; rerun
with ``INTERLOCK_HYPOTHESIS_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from services.orchestrator import state_machine as sm
from shared.domain.decisions import DecisionError
from shared.domain.execution import Execution
from shared.domain.execution import ExecutionStatus as S
from shared.events import (
    CancelRequested,
    DispatchKind,
    EventModel,
    ExecutionDispatched,
    ExecutionReported,
    ReportOutcome,
)
from tests import factories as f

SEED = int(os.environ.get("INTERLOCK_HYPOTHESIS_SEED") or random.randrange(2**32))
SCOPE = f.SCOPE


@dataclass
class World:
    """One execution, everything ever sent to the orchestrator and to the sandbox, and the
    suspension claims."""

    stages: int
    execution: Execution = field(default_factory=lambda: f.pending("exec-p"))
    inbox: list[EventModel] = field(default_factory=list)
    """Every event ever sent to the orchestrator (redeliverable forever)."""
    commands: list[ExecutionDispatched] = field(default_factory=list)
    claims: dict[int, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    # --- the orchestrator's handler ----------------------------------------------------------

    def handle(self, event: EventModel, crash: str = "none") -> sm.Outcome | None:
        """Apply one event as the handler does; None when it was rejected (dead-lettered)."""
        self.log.append(f"{type(event).__name__}({getattr(event, 'epoch', '')}) crash={crash}")
        current = self.execution
        try:
            outcome = self._outcome(current, event)
        except (DecisionError, sm.AlreadyFinished):
            return None
        if outcome.claim is not None:
            assert isinstance(event, f.DecisionSubmitted)
            holder = self.claims.setdefault(outcome.claim, event.decision_id)
            if holder != event.decision_id:
                return None  # another decision holds the suspension
        if crash == "before_write":
            return outcome
        if outcome.changed:
            self.execution = outcome.execution
        if crash == "after_write":
            return outcome  # stored; the follow-ups are lost until a redelivery re-drives them
        for command in sm.follow_ups(self.execution, causation_id=event.event_id):
            if command.event_id not in {c.event_id for c in self.commands}:
                self.commands.append(command)
        return outcome

    @staticmethod
    def _outcome(execution: Execution, event: EventModel) -> sm.Outcome:
        if isinstance(event, f.ExecutionRequested):
            return sm.on_requested(execution, event)
        if isinstance(event, f.DecisionSubmitted):
            return sm.on_decision(execution, event)
        if isinstance(event, CancelRequested):
            return sm.on_cancel(execution, event)
        if isinstance(event, f.ExecutionSuspended):
            return sm.on_suspended(execution, event)
        assert isinstance(event, ExecutionReported)
        if event.outcome is ReportOutcome.STARTED:
            return sm.on_started(execution, event)
        return sm.on_finished(execution, event)

    # --- the sandbox ---------------------------------------------------------------------------

    def run(self, command: ExecutionDispatched, *, zombie: bool = False) -> None:
        """The sandbox runs a command unless it is stale; its agent suspends ``stages`` times
        (a rejection ends it at once). A zombie (a replica frozen past its lease) ran it before
        it went stale and reports now, whatever it is."""
        execution = self.execution
        if not zombie and (command.epoch != execution.epoch or execution.status.is_terminal):
            return
        epoch = command.epoch
        started = ExecutionReported(
            event_id=f"exec-p:started:{epoch}",
            execution_id="exec-p",
            epoch=epoch,
            outcome=ReportOutcome.STARTED,
            **SCOPE,
        )
        self.inbox.append(started)
        rejected = command.kind is DispatchKind.RESUME and (
            command.resume is not None and command.resume.decision == "reject"
        )
        if (epoch <= self.stages and not rejected) != (zombie and epoch % 2 == 0):
            suspended = f.suspended_event(execution.model_copy(update={"epoch": epoch}))
            self.inbox.append(suspended.model_copy(update={"event_id": f"exec-p:susp:{epoch}"}))
        else:
            self.inbox.append(
                ExecutionReported(
                    event_id=f"exec-p:finished:{epoch}",
                    execution_id="exec-p",
                    epoch=epoch,
                    outcome=ReportOutcome.COMPLETED,
                    result={"epoch": epoch},
                    **SCOPE,
                )
            )

    # --- reviewers -----------------------------------------------------------------------------

    def decision(self, answer: str, suspension_id: int) -> f.DecisionSubmitted:
        event = f.DecisionSubmitted(
            execution_id="exec-p", decision=answer, suspension_id=suspension_id, **SCOPE
        )
        self.inbox.append(event)
        return event


def check_invariants(world: World) -> None:
    execution = world.execution
    status = S.PENDING
    for entry in execution.audit:
        if entry.action != "transition":
            continue
        assert entry.from_status is status, (entry, status)
        assert entry.to_status in sm.ALLOWED_TRANSITIONS[status], entry
        status = entry.to_status
    assert status is execution.status
    suspensions = [d.suspension_id for d in execution.decisions]
    assert suspensions == sorted(set(suspensions)), suspensions  # one per suspension, growing
    for decision in execution.decisions:
        if decision.reviewer != sm.DEADLINES:
            assert world.claims.get(decision.suspension_id) == decision.decision_id
    assert all(s < execution.epoch for s in suspensions)
    if execution.status is S.SUSPENDED:
        assert execution.suspension is not None
        assert execution.suspension.suspension_id == execution.epoch
    if execution.status is S.COMPLETED:
        # Only the current attempt's result counts: a stale or zombie report never does.
        assert execution.result == {"epoch": execution.epoch}, (execution.result, world.log[-8:])


ACTIONS = [
    *["deliver"] * 4,
    *["run"] * 2,
    "zombie",
    "decide",
    "early",
    "rival",
    "cancel",
]


@seed(SEED)
@settings(
    max_examples=int(os.environ.get("INTERLOCK_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
@given(st.data())
def test_random_interleavings_keep_every_invariant_and_end(data: Any) -> None:
    try:
        _interleave(data)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (rerun with INTERLOCK_HYPOTHESIS_SEED={SEED})") from exc


def _interleave(data: Any) -> None:
    world = World(stages=data.draw(st.integers(0, 3), label="stages"))
    world.inbox.append(f.requested("exec-p"))
    cancels = data.draw(st.booleans(), label="may cancel")
    for _ in range(data.draw(st.integers(5, 60), label="steps")):
        action = data.draw(st.sampled_from(ACTIONS))
        execution = world.execution
        if action == "deliver" and world.inbox:
            event = data.draw(st.sampled_from(world.inbox))
            crash = data.draw(st.sampled_from(["none", "none", "before_write", "after_write"]))
            before = world.execution
            outcome = world.handle(event, crash)
            if outcome is not None and crash == "none":
                # Redelivered at once, the same event changes nothing more.
                again = world.handle(event)
                assert again is None or not again.transitions, (event, world.log[-6:])
                assert world.execution.epoch >= before.epoch
        elif action == "run" and world.commands:
            world.run(data.draw(st.sampled_from(world.commands)))
        elif action == "zombie" and world.commands:
            world.run(data.draw(st.sampled_from(world.commands)), zombie=True)
        elif action == "decide" and execution.status is S.SUSPENDED:
            assert execution.suspension is not None
            answer = data.draw(st.sampled_from(["approve", "approve", "reject"]))
            world.decision(answer, execution.suspension.suspension_id)
        elif action == "early" and execution.epoch >= 1 and not execution.status.is_terminal:
            # Before its suspension is recorded (or for the current one: the same decision).
            world.decision("approve", execution.epoch)
        elif action == "rival" and world.execution.decisions:
            stale = data.draw(st.sampled_from(world.execution.decisions)).suspension_id
            world.decision("approve", stale)  # a second reviewer, late
        elif action == "cancel" and cancels:
            world.inbox.append(CancelRequested(execution_id="exec-p", **SCOPE))
        check_invariants(world)
    _drain(world)


def _drain(world: World, budget: int = 400) -> None:
    """No more faults: deliver everything in order, run every command, approve every
    suspension. The execution must end."""
    delivered: set[int] = set()
    ran: set[str] = set()
    for _ in range(budget):
        if world.execution.status.is_terminal:
            return
        fresh = [e for e in world.inbox if id(e) not in delivered]
        commands = [c for c in world.commands if c.event_id not in ran]
        if fresh:
            delivered.add(id(fresh[0]))
            world.handle(fresh[0])
        elif commands:
            ran.add(commands[0].event_id)
            world.run(commands[0])
        elif world.execution.status is S.SUSPENDED:
            assert world.execution.suspension is not None
            world.decision("approve", world.execution.suspension.suspension_id)
        else:
            # Nothing left to deliver: redeliver everything once (a crash lost a publish).
            delivered.clear()
            ran.clear()
        check_invariants(world)
    raise AssertionError(
        f"still {world.execution.status.value} after draining; last steps {world.log[-10:]}"
    )
