"""Conversations: a thread carries its runs as a chain of executions, one per turn. Pure.

Turn ``n`` of a thread is the execution whose id derives from the thread and ``n``
(``turn_execution_id``), so finding a turn is a point read, and creating it an insert under a
unique ``_id``: of two requests that both saw turn ``n`` last, exactly one creates turn ``n + 1``
(the only atomic write FerretDB has), and the other tries ``n + 2``. Each turn names the turn
before it (``ThreadTurn.after``): the orchestrator dispatches a turn only once every turn before
it ended, so two runs of a thread never overlap, and it wakes the next turn when one ends. Each
turn names the execution whose checkpoint it starts from (``base``): the one before it, or, when
the one before was rolled back, that one's own base; the sandbox copies that checkpoint into the
turn's own checkpoint thread before it runs the input, as LangGraph runs a second input on a
thread. Checkpoints and durable steps stay keyed by the turn's execution, so a step of turn 3 is
never confused with one of turn 1.

A base that left no checkpoint (a turn cancelled while it waited, or in its first run before it
stopped) has nothing to start from: the orchestrator starts the turn from that one's base instead
(``left_state``), so what a turn sees is the state the turns that stopped left, whatever was
cancelled in between.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.domain.execution import Execution, ExecutionStatus
from shared.errors import InterlockError
from shared.events import BusyThreadPolicy

IDEMPOTENCY_NAMESPACE = uuid.UUID("6f1c9a52-4a8e-4d0b-9a57-3c1f4e2b7d10")
THREAD_KEY_PREFIX = "langgraph-thread:"
TURN_SEPARATOR = "#"
MAX_TURN_PROBES = 50
"""How far past the store's turn hint a reader looks before it gives up (the hint trails by one
normally, by a few under racing writers; a bound, never a scan of the thread)."""


def execution_id_for(project_id: str, workspace_id: str, idempotency_key: str | None) -> str:
    """The execution an idempotency key names in a workspace (a new id without one)."""
    if idempotency_key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{project_id}/{workspace_id}/{idempotency_key}"))


def turn_key(thread_id: str, turn: int) -> str:
    """The idempotency key of a thread's turn. Turn 1 keeps the key a thread's one execution had
    before threads carried several, so those threads read on as their first turn."""
    if turn < 1:
        raise ValueError(f"turns count from 1, not {turn}")
    base = f"{THREAD_KEY_PREFIX}{thread_id}"
    return base if turn == 1 else f"{base}{TURN_SEPARATOR}{turn}"


def turn_execution_id(project_id: str, workspace_id: str, thread_id: str, turn: int) -> str:
    return execution_id_for(project_id, workspace_id, turn_key(thread_id, turn))


def thread_of_key(idempotency_key: str | None) -> str | None:
    """The thread a turn's idempotency key names, or None for a key of no thread. Thread ids
    never contain ``#`` (the gateway's identifiers), so the last one ends the thread id."""
    key = idempotency_key or ""
    if not key.startswith(THREAD_KEY_PREFIX):
        return None
    thread = key.removeprefix(THREAD_KEY_PREFIX)
    head, separator, tail = thread.rpartition(TURN_SEPARATOR)
    return head if separator and tail.isdigit() else thread


def left_state(execution: Execution) -> bool:
    """Did the turn store a checkpoint a later turn can start from? The sandbox checkpoints a
    run when it stops (it suspends, completes or fails), so a turn that ran has one unless it
    was cancelled in its first run, before it ever stopped."""
    if not has_run(execution):
        return False
    if execution.status is not ExecutionStatus.CANCELLED:
        return True
    return any(entry.to_status is ExecutionStatus.SUSPENDED for entry in execution.audit)


def has_run(execution: Execution) -> bool:
    """Was the turn ever dispatched? One cancelled while it waited for the turn before it never
    was, so the turns after it still wait for that one."""
    return any(entry.action == "dispatched" for entry in execution.audit)


@dataclass(frozen=True)
class TurnPlan:
    """Where a new input goes on a thread: its turn, the turn it waits for, the execution whose
    checkpoint it starts from, and the busy turn to cancel first (``interrupt`` / ``rollback``)."""

    turn: int
    after: str | None
    base: str | None
    cancels: Execution | None = None


class ThreadBusy(InterlockError):
    """A new input found its thread busy (running, queued or waiting for a review) and its
    policy is ``reject``."""

    problem_type = "thread-busy"
    problem_title = "Thread is busy"
    problem_status = 409

    def __init__(self, latest: Execution) -> None:
        super().__init__(f"the thread's latest run is {latest.status.value}")
        self.latest = latest


def expiry(ttl_minutes: float | None, now: datetime) -> datetime | None:
    """When a thread with this time to live expires, counted from ``now``."""
    return None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes)


class WrongAgent(InterlockError):
    """A turn names another agent than its thread's: a thread is one agent's conversation (its
    checkpoints are that graph's state)."""

    problem_type = "assistant-mismatch"
    problem_title = "Agent does not match the thread"
    problem_status = 409

    def __init__(self, agent: str) -> None:
        super().__init__(agent)
        self.agent = agent


def turn_number(execution: Execution) -> int:
    """The turn an execution is (a thread's one execution from before turns counts as 1)."""
    return execution.input.turn.turn if execution.input.turn is not None else 1


def base_of(execution: Execution) -> str | None:
    turn = execution.input.turn
    return turn.base if turn is not None else None


def plan_turn(latest: Execution | None, policy: BusyThreadPolicy) -> TurnPlan:
    """The next turn after ``latest`` (None: the thread has run nothing) under ``policy``.

    A thread is busy while its latest turn has not ended, a review it waits for included: a new
    input never takes a pending review away in silence. ``enqueue`` runs after it, on what it
    leaves; ``interrupt`` cancels it and runs on the state it stopped at; ``rollback`` cancels it
    and runs on the state before it, as if it had never run; ``reject`` refuses."""
    if latest is None:
        return TurnPlan(1, None, None)
    following = turn_number(latest) + 1
    if latest.status.is_terminal:
        return TurnPlan(following, latest.execution_id, latest.execution_id)
    if policy == "reject":
        raise ThreadBusy(latest)
    if policy == "enqueue":
        return TurnPlan(following, latest.execution_id, latest.execution_id)
    base = latest.execution_id if policy == "interrupt" else base_of(latest)
    return TurnPlan(following, latest.execution_id, base, cancels=latest)
