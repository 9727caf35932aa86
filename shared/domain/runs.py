"""How a LangGraph client sees an execution's runs, and when a run's webhook is due. Pure, no I/O.

A run is one segment of an execution: the first from its input, each later one from a decision
that resumed it, each numbered by the epoch that dispatched it (``run_id``). The gateway answers
runs with these (services/gateway/langgraph/views.py); the orchestrator uses them to say, from
the stored execution alone, which run just ended and what its webhook tells (``webhooks_due``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from shared.domain.execution import Execution, ExecutionStatus, RunWebhook
from shared.domain.threads import thread_of_key
from shared.events import PendingInterrupt

RUN_NAMESPACE = uuid.UUID("0d8c3c55-2f5e-4f0c-8f5c-4b8e5d1c7a21")

RunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]


def thread_of(execution: Execution) -> str | None:
    """The thread an execution is a turn of, or None for a one-off execution."""
    turn = execution.input.turn
    return turn.thread_id if turn is not None else thread_of_key(execution.idempotency_key)


def run_id(execution_id: str, epoch: int) -> str:
    """The id of the run that dispatched ``epoch`` (1: the input; each resume the next)."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{execution_id}/{epoch}"))


def run_status(execution: Execution, epoch: int) -> RunStatus:
    """A run that stopped at an interrupt succeeded (its thread is interrupted). A cancel moves
    the epoch on (to fence a run under way), so the run it ended is the one before."""
    if execution.status is ExecutionStatus.CANCELLED:
        return "interrupted" if epoch >= execution.epoch - 1 else "success"
    if epoch < execution.epoch:
        return "success"
    if epoch > execution.epoch:
        # Accepted, not yet dispatched: a new execution, or a decision not yet applied.
        return "pending"
    status = execution.status
    if status in (ExecutionStatus.SUSPENDED, ExecutionStatus.COMPLETED, ExecutionStatus.EXPIRED):
        return "success"
    if status is ExecutionStatus.ERROR:
        return "error"
    return "pending" if status is ExecutionStatus.PENDING else "running"


def interrupts_of(execution: Execution) -> list[dict[str, Any]]:
    """The pending interrupts as LangGraph shows them: ``{"value", "id"}`` each."""
    suspension = execution.suspension
    if execution.status is not ExecutionStatus.SUSPENDED or suspension is None:
        return []
    raw = suspension.interrupts or _reconstructed(
        suspension.interrupt_ids, suspension.suspend_context
    )
    return [{"value": i.value, "id": i.interrupt_id} for i in raw]


def _reconstructed(ids: list[str], context: dict[str, Any]) -> list[PendingInterrupt]:
    """Suspensions stored before the raw values were kept: the reviewer's view of them."""
    if len(ids) == 1:
        return [PendingInterrupt(interrupt_id=ids[0], value=context)]
    listed = context.get("interrupts")
    values = (
        listed if isinstance(listed, list) and len(listed) == len(ids) else [context] * len(ids)
    )
    return [PendingInterrupt(interrupt_id=i, value=v) for i, v in zip(ids, values, strict=True)]


def values_of(execution: Execution, earlier: Execution | None = None) -> dict[str, Any]:
    """The graph's state as last recorded: the result once completed, the state it suspended
    with; before either, the state of the turn it started from (``earlier``), or its input
    when it is a thread's first turn."""
    if execution.status is ExecutionStatus.COMPLETED and isinstance(execution.result, dict):
        return dict(execution.result)
    suspension = execution.suspension
    if suspension is not None and suspension.values is not None:
        return dict(suspension.values)
    if execution.stopped_values is not None:
        return dict(execution.stopped_values)
    if earlier is not None:
        return values_of(earlier)
    return execution.input.graph_input()


# --- run webhooks ----------------------------------------------------------------------------

MAX_WEBHOOK_VALUES_BYTES = 256 * 1024
"""The largest state a webhook's ``values`` carries (as JSON); a larger one is left out
(``values_omitted``), for the message and the receiver alike: the thread's state has it."""

RUN_ERROR_STATUSES = (ExecutionStatus.ERROR, ExecutionStatus.EXPIRED)


def last_run(execution: Execution) -> int:
    """The epoch of the latest run dispatched (a cancel moves the epoch on and starts none)."""
    if execution.status is ExecutionStatus.CANCELLED:
        return max(execution.epoch - 1, 1)
    return max(execution.epoch, 1)


def run_ended(execution: Execution, epoch: int) -> bool:
    """Has the run of ``epoch`` stopped, at an interrupt or with the execution's end?"""
    if execution.status.is_terminal:
        return epoch <= last_run(execution)
    if execution.status is ExecutionStatus.SUSPENDED:
        return epoch <= execution.epoch
    return epoch < execution.epoch


def webhooks_due(execution: Execution) -> list[RunWebhook]:
    """The webhooks to call now: those of the latest run and the one before it, once ended.

    Derived from the stored execution alone, so the orchestrator sends them again after every
    outcome, a redelivery's too, and a crash between the write and the publish loses none (the
    notifier keeps one delivery per run). The run before the latest is included because a
    decision can move the execution on before a lost publish is redriven; older runs' webhooks
    were due, and sent, when theirs ended. A webhook of a run that never started (a decision
    overtaken by a cancel) is never due."""
    latest = last_run(execution)
    return [
        hook
        for hook in execution.webhooks
        if hook.epoch >= latest - 1 and hook.epoch <= latest and run_ended(execution, hook.epoch)
    ]


def webhook_payload(execution: Execution, hook: RunWebhook) -> dict[str, Any]:
    """What the webhook of run ``hook`` is told, as LangGraph's server tells it: the run (its
    id, thread, assistant, status, times), the thread's state ``values`` when it ended, and
    ``error`` when it failed; with Interlock's ``execution_id`` and pending ``interrupts``
    besides (a receiver written for LangGraph reads past them)."""
    status = run_status(execution, hook.epoch)
    payload: dict[str, Any] = {
        "run_id": run_id(execution.execution_id, hook.epoch),
        "thread_id": thread_of(execution),
        "assistant_id": execution.agent,
        "created_at": hook.requested_at.isoformat(),
        "updated_at": execution.updated_at.isoformat(),
        "run_started_at": hook.requested_at.isoformat(),
        "run_ended_at": execution.updated_at.isoformat(),
        "status": status,
        "metadata": {},
        "multitask_strategy": execution.input.turn.policy if execution.input.turn else "reject",
        "execution_id": execution.execution_id,
        "execution_status": execution.status.value,
        "interrupts": interrupts_of(execution) if hook.epoch == execution.epoch else [],
    }
    values = values_of(execution)
    if len(json.dumps(values, default=str)) <= MAX_WEBHOOK_VALUES_BYTES:
        payload["values"] = values
    else:
        payload["values"], payload["values_omitted"] = None, True
    if execution.status in RUN_ERROR_STATUSES and hook.epoch == last_run(execution):
        error = execution.error or {}
        payload["error"] = {
            "error": error.get("error_type", "Error"),
            "message": error.get("message", "the run failed"),
        }
    return payload
