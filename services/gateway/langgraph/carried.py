"""What a held request learns of its execution from the changes it hears, without the store.

A change that stops a run (a suspension, or the execution's end) carries the execution as
stored (shared/activity.py, ``ExecutionChange.execution``), so a wait, a join or a stream
answers from the message; only a change that does not carry it (an orchestrator of the release
before, or a state too big to carry) sends the request to the store. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from shared.activity import ExecutionActivity, stops_a_run
from shared.domain.execution import Execution


def advanced(execution: Execution, arrived: Iterable[ExecutionActivity]) -> Execution | None:
    """``execution`` after what ``arrived``: the newest version a stopping change carries, or
    ``execution`` itself when nothing newer stopped; None when a stopping change came without
    the execution (read it from the store). A repeated or older announcement moves nothing
    back: the version decides."""
    newest = execution
    for activity in arrived:
        change = activity.change
        if change is None or not stops_a_run(change.status):
            continue
        carried = change.stored()
        if carried is None:
            return None
        if carried.version > newest.version:
            newest = carried
    return newest
