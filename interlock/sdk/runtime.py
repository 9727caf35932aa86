"""The runtime's side of durable steps, for the sandbox: agent code does not import this.

The sandbox opens a :class:`StepRun` per graph run (one load of the execution's steps) and binds
it with :func:`step_run` around the run. LangGraph copies the context into the tasks and worker
threads that run nodes, so a durable step anywhere in the graph finds the run bound here. With
no run bound (agent code outside Interlock, plain tests) steps are ordinary calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog

from shared.store.ports import StepRecord, StepStore

__all__ = ["CURRENT_KEY", "CURRENT_RUN", "DEFAULT_MAX_RESULT_BYTES", "Fence", "StepRun", "step_run"]

log = structlog.get_logger(__name__)

Fence = Callable[[], Awaitable[None]]

DEFAULT_MAX_RESULT_BYTES = 1_000_000
REPLAYED_LOGGED = 20
"""How many of a run's replayed steps its ``steps.replayed`` line lists (all are counted)."""


@dataclass(eq=False)
class StepRun:
    """The step cache of one agent run (one dispatch attempt): built by the sandbox."""

    execution_id: str
    epoch: int
    attempt: int
    store: StepStore
    cache: dict[str, StepRecord]
    loop: asyncio.AbstractEventLoop
    """The sandbox's event loop: the store is async and bound to it."""
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    fence: Fence | None = None
    """Awaited before every cache write; raises if this attempt was superseded."""
    read_on_miss: bool = False
    """``cache`` may lack steps that are stored (an earlier attempt of this epoch crashed before
    its checkpoint): look a step up by its key before running it."""
    # Sync nodes of one superstep run in parallel worker threads, hence the lock.
    _ordinals: dict[tuple[str, str, int, str], int] = field(
        default_factory=dict, init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    legacy: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    """A step's key -> the key it had before keys left LangGraph's task ids out."""
    replayed: list[StepRecord] = field(default_factory=list, init=False, repr=False)
    """The steps this run served from the cache, in order: logged once when the run ends (one
    line per step would cost more than serving the step)."""

    @classmethod
    async def open(
        cls,
        *,
        execution_id: str,
        epoch: int,
        attempt: int,
        store: StepStore,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        fence: Fence | None = None,
        known: dict[str, StepRecord] | None = None,
        read_on_miss: bool = False,
    ) -> StepRun:
        """A run of the execution's steps on the running loop: ``known`` are the steps its
        checkpoint lists (nothing read); without it all of them are loaded (one query)."""
        return cls(
            execution_id=execution_id,
            epoch=epoch,
            attempt=attempt,
            store=store,
            cache=dict(known) if known is not None else await store.load(execution_id),
            loop=asyncio.get_running_loop(),
            max_result_bytes=max_result_bytes,
            fence=fence,
            read_on_miss=read_on_miss,
        )

    def remember_legacy(self, key: str, legacy: str) -> None:
        with self._lock:
            self.legacy[key] = legacy

    def next_ordinal(self, scope: tuple[str, str, int, str]) -> int:
        """How many steps of this scope were called before in this run (0, 1, 2, ...)."""
        with self._lock:
            ordinal = self._ordinals.get(scope, 0)
            self._ordinals[scope] = ordinal + 1
        return ordinal

    def replay(self, record: StepRecord) -> None:
        """Note a step served from the cache, for the run's ``steps.replayed`` line."""
        with self._lock:
            self.replayed.append(record)


CURRENT_RUN: contextvars.ContextVar[StepRun | None] = contextvars.ContextVar(
    "interlock_step_run", default=None
)
CURRENT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "interlock_step_key", default=None
)


@contextmanager
def step_run(run: StepRun) -> Iterator[StepRun]:
    """Bind ``run`` for the duration of a graph run. LangGraph copies the context into the
    tasks and worker threads that run nodes, so steps anywhere in the graph find it."""
    token = CURRENT_RUN.set(run)
    try:
        yield run
    finally:
        CURRENT_RUN.reset(token)
        if run.replayed:
            log.info(
                "steps.replayed",
                execution_id=run.execution_id,
                count=len(run.replayed),
                steps=[
                    {
                        "step": r.name,
                        "key": r.key,
                        "stored_epoch": r.epoch,
                        "stored_attempt": r.attempt,
                    }
                    for r in run.replayed[:REPLAYED_LOGGED]
                ],
            )
