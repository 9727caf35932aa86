"""How Interlock's executions look to a LangGraph client: threads, runs, thread states and the
results a run waits for. Pure, no I/O.

A thread's turns and their runs need no lookup table: a turn's execution id is derived from the
thread's and the turn's number (shared/domain/threads.py), and a run's id from the execution's id
and the epoch the run dispatched (``run_id``), so a run id is found again by recomputing the few
ids a turn has had (one per resume).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.runs import (
    interrupts_of,
    run_id,
    run_status,
    values_of,
)
from shared.store.threads import ThreadRecord

ThreadStatus = Literal["idle", "busy", "interrupted", "error"]

THREAD_STATUS: dict[ExecutionStatus, ThreadStatus] = {
    ExecutionStatus.PENDING: "busy",
    ExecutionStatus.RUNNING: "busy",
    ExecutionStatus.RESUMING: "busy",
    ExecutionStatus.SUSPENDED: "interrupted",
    ExecutionStatus.COMPLETED: "idle",
    ExecutionStatus.CANCELLED: "idle",
    ExecutionStatus.ERROR: "error",
    ExecutionStatus.EXPIRED: "error",
}
"""An expired review ended the execution without an answer: an error to a LangGraph client,
which has no status for it."""

STATUSES_OF_THREAD: dict[str, tuple[ExecutionStatus, ...]] = {
    thread_status: tuple(s for s, t in THREAD_STATUS.items() if t == thread_status)
    for thread_status in ("busy", "interrupted", "error", "idle")
}


def last_run_epoch(execution: Execution, *, decided: bool) -> int:
    """The epoch of a turn's latest run: the one dispatched last (a cancel moves the epoch on
    to fence the run under way, and starts none), or the next once a decision took the
    current suspension (``decided``), though not yet dispatched."""
    if execution.status is ExecutionStatus.CANCELLED:
        return max(execution.epoch - 1, 1)
    return max(execution.epoch, 1) + (1 if decided else 0)


def epoch_of_run(execution: Execution, wanted: str, *, decided: bool) -> int | None:
    """The epoch of run ``wanted`` of ``execution``, or None when it has no such run. Runs are
    the epochs dispatched so far, the first even before it is dispatched, and the next one once
    a decision took the current suspension (``decided``) though not yet dispatched."""
    last = last_run_epoch(execution, decided=decided)
    for epoch in range(last, 0, -1):
        if run_id(execution.execution_id, epoch) == wanted:
            return epoch
    return None


def current_run_epoch(execution: Execution) -> int:
    return max(execution.epoch, 1)


def segment_done(execution: Execution, epoch: int | None) -> bool:
    """Has the run of ``epoch`` stopped: at a later suspension, or with the execution's end?
    (With None: has the execution ended?)"""
    if execution.status.is_terminal:
        return True
    if epoch is None:
        return False
    return execution.status is ExecutionStatus.SUSPENDED and execution.epoch >= epoch


def result_of(execution: Execution, earlier: Execution | None = None) -> dict[str, Any]:
    """What ``runs.wait`` and ``runs.join`` answer: the state, with the pending interrupts under
    ``__interrupt__``, or ``__error__`` for a run that failed (the client raises it)."""
    if execution.status is ExecutionStatus.ERROR:
        error = execution.error or {}
        return {
            "__error__": {
                "error": error.get("error_type", "Error"),
                "message": error.get("message", "the run failed"),
            }
        }
    values = values_of(execution, earlier)
    interrupts = interrupts_of(execution)
    if interrupts:
        values["__interrupt__"] = interrupts
    return values


@dataclass(frozen=True)
class ThreadView:
    """A thread as ``threads.get`` answers it: with its latest turn, if a run started one, and
    the turn that one started from while it has no values of its own."""

    record: ThreadRecord
    execution: Execution | None
    earlier: Execution | None = None

    @property
    def status(self) -> ThreadStatus:
        return THREAD_STATUS[self.execution.status] if self.execution else "idle"

    @property
    def values(self) -> dict[str, Any] | None:
        return values_of(self.execution, self.earlier) if self.execution else None

    def body(self) -> dict[str, Any]:
        execution = self.execution
        updated: datetime = execution.updated_at if execution else self.record.created_at
        interrupts = interrupts_of(execution) if execution else []
        metadata = dict(self.record.metadata)
        if execution is not None:
            # As LangGraph's server sets them on every run: the thread's agent, whatever the
            # client put there (Agent Inbox and Chat UI search threads by them).
            metadata["graph_id"] = execution.agent
            metadata["assistant_id"] = execution.agent
        return {
            "thread_id": self.record.thread_id,
            "created_at": self.record.created_at.isoformat(),
            "updated_at": updated.isoformat(),
            "metadata": metadata,
            "status": self.status,
            "values": self.values,
            "interrupts": {task_id(execution): interrupts} if execution and interrupts else {},
        }


def task_id(execution: Execution) -> str:
    """The id of the task waiting in the current suspension (one per suspension here)."""
    return run_id(execution.execution_id, execution.epoch)


def checkpoint_of(thread_id: str, execution: Execution | None) -> dict[str, Any]:
    """Interlock checkpoints once per run segment: the turn and the epoch name it (a thread's
    first turn by its epoch alone, as before threads carried several)."""
    epoch = execution.epoch if execution else 0
    turn = execution.input.turn.turn if execution and execution.input.turn else 1
    return {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": f"epoch-{epoch}" if turn == 1 else f"turn-{turn}-epoch-{epoch}",
        "checkpoint_map": None,
    }


def checkpoint_turn(checkpoint_id: str) -> tuple[int, int] | None:
    """The (turn, epoch) a checkpoint id of ``checkpoint_of`` names, or None for another id."""
    turn, epoch = "1", checkpoint_id.removeprefix("epoch-")
    if checkpoint_id.startswith("turn-"):
        turn, _, epoch = checkpoint_id.removeprefix("turn-").partition("-epoch-")
    if not (turn.isdigit() and epoch.isdigit()) or checkpoint_id == epoch or int(turn) < 1:
        return None
    return int(turn), int(epoch)


def state_of(
    record: ThreadRecord, execution: Execution | None, earlier: Execution | None = None
) -> dict[str, Any]:
    """``threads.get_state``: the values, and the waiting task with its interrupts."""
    if execution is None:
        return {
            "values": {},
            "next": [],
            "tasks": [],
            "checkpoint": checkpoint_of(record.thread_id, None),
            "metadata": dict(record.metadata),
            "created_at": None,
            "parent_checkpoint": None,
            "interrupts": [],
        }
    interrupts = interrupts_of(execution)
    nodes = list(execution.suspension.next) if interrupts and execution.suspension else []
    tasks = [
        {
            "id": task_id(execution),
            "name": nodes[0] if nodes else execution.agent,
            "error": None,
            "interrupts": interrupts,
            "checkpoint": None,
            "state": None,
            "result": None,
        }
    ]
    return {
        "values": values_of(execution, earlier),
        "next": nodes if interrupts else [],
        "tasks": tasks if interrupts else [],
        "checkpoint": checkpoint_of(record.thread_id, execution),
        "metadata": {**record.metadata, "graph_id": execution.agent, "step": execution.epoch},
        "created_at": execution.updated_at.isoformat(),
        "parent_checkpoint": None,
        "interrupts": interrupts,
    }


def run_body(
    thread_id: str, execution: Execution, epoch: int, *, created_at: datetime | None = None
) -> dict[str, Any]:
    """A run as ``runs.create`` and ``runs.get`` answer it."""
    return {
        "run_id": run_id(execution.execution_id, epoch),
        "thread_id": thread_id,
        "assistant_id": execution.agent,
        "created_at": (created_at or execution.created_at).isoformat(),
        "updated_at": execution.updated_at.isoformat(),
        "status": run_status(execution, epoch),
        "metadata": {},
        "multitask_strategy": execution.input.turn.policy if execution.input.turn else "reject",
    }


def contains(actual: Any, wanted: Any) -> bool:
    """JSON containment, as LangGraph's thread search filters metadata and values (``@>``):
    every key of an object asked for is there with a value containing the one asked for; a
    list contains each item asked for; anything else is equal."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(actual, list) and all(any(contains(a, w) for a in actual) for w in wanted)
    return bool(actual == wanted)


def thread_filter(
    metadata: dict[str, Any] | None, values: dict[str, Any] | None
) -> Callable[[ThreadView], bool] | None:
    """What a thread search's ``metadata`` and ``values`` keep (None: everything)."""
    if not metadata and not values:
        return None

    def matches(view: ThreadView) -> bool:
        body = view.body()
        return contains(body["metadata"], metadata or {}) and contains(
            body["values"] or {}, values or {}
        )

    return matches
