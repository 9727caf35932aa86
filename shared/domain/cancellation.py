"""Cancelling an execution is possible until it has ended. Pure, no I/O.

The gateway refuses a cancel of an ended execution at once (409); the orchestrator checks again
when it applies the request, since an execution may end while the request is on its way.
"""

from __future__ import annotations

from shared.domain.execution import Execution, ExecutionStatus
from shared.errors import InterlockError


class AlreadyFinished(InterlockError):
    """The execution has ended: there is nothing to cancel."""

    problem_type = "already-finished"
    problem_title = "Execution already finished"
    problem_status = 409

    def __init__(self, status: ExecutionStatus) -> None:
        super().__init__(f"execution is already {status.value}; there is nothing to cancel")
        self.status = status


def check_cancellable(execution: Execution) -> None:
    """Raise AlreadyFinished when ``execution`` has ended."""
    if execution.status.is_terminal:
        raise AlreadyFinished(execution.status)


def still_under_way(execution: Execution, epoch: int) -> bool:
    """Is the run of ``epoch`` still to stop: not yet started (a new turn, one queued behind
    another), starting or running? A run that stopped is not: one waiting at a review (its
    own, or a decision's run still waiting to be applied or for the approvals it needs), one
    that ended, or one a later run followed. What a stream's client that leaves with
    ``on_disconnect='cancel'`` cancels, as LangGraph's server cancels only a run under way."""
    if execution.status.is_terminal or execution.status is ExecutionStatus.SUSPENDED:
        return False
    return execution.epoch <= epoch
