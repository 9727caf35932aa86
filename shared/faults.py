"""Fault injection for tests: crash or stall a service at a named point. Off unless configured.

``INTERLOCK_FAULTS`` lists ``point=action`` pairs separated by commas, for example
``INTERLOCK_FAULTS="step.after_effect=crash,sandbox.before_report=stall"``. Actions:

- ``crash``: the process kills itself with SIGKILL (no cleanup, no flush: as a power cut);
- ``stall``: the process stops itself with SIGSTOP until something sends SIGCONT (a zombie that
  outlives its lease).

``INTERLOCK_FAULTS_ONCE_DIR`` makes each point fire once across every process that shares the
folder (a marker file is created atomically): with two replicas configured alike, exactly one
crashes and the other finishes the work. Without it a point fires every time it is reached.

Named points (grep for ``fault_point(`` to see them in the code):

- ``step.after_effect``: a durable step's function returned, its result not yet cached;
- ``step.after_cache``: the step's result is cached, the graph has not checkpointed yet;
- ``sandbox.before_report``: the agent run finished, its report not yet published;
- ``orchestrator.after_write``: a state change is stored, what follows not yet published.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

FAULTS_ENV = "INTERLOCK_FAULTS"
ONCE_DIR_ENV = "INTERLOCK_FAULTS_ONCE_DIR"
ACTIONS = ("crash", "stall")


class FaultConfigError(ValueError):
    pass


def configured_faults(raw: str | None = None) -> dict[str, str]:
    text = os.environ.get(FAULTS_ENV, "") if raw is None else raw
    faults: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        point, _, action = item.partition("=")
        if not point or action not in ACTIONS:
            raise FaultConfigError(f"{FAULTS_ENV}: expected point=crash|stall, got {item!r}")
        faults[point] = action
    return faults


def _first_to_fire(point: str) -> bool:
    folder = os.environ.get(ONCE_DIR_ENV)
    if not folder:
        return True
    marker = Path(folder) / f"{point}.fired"
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with marker.open("x"):
            return True
    except FileExistsError:
        return False


def fault_point(point: str) -> None:
    """Crash or stall here if the environment asks for it; otherwise do nothing (cheaply)."""
    if FAULTS_ENV not in os.environ:
        return
    action = configured_faults().get(point)
    if action is None or not _first_to_fire(point):
        return
    log.warning("fault.injected", point=point, action=action, pid=os.getpid())
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        os.kill(os.getpid(), signal.SIGSTOP)
