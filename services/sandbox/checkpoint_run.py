"""What one run knows of the threads it owns, for the sandbox's checkpoint saver
(services/sandbox/mongo_checkpoints.py, whose docstring says why): the newest checkpoint of each
thread as the run last read or wrote it, the writes it holds until it ends, and the heads it read.
``run_scope`` opens a run; the saver finds it with ``current_run``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Document = dict[str, Any]


class HeldWriter(Protocol):
    """The saver that stores what a run held, when the run ends."""

    async def write_head(self, run: Run, key: tuple[str, str], known: Known) -> None:
        """Store a checkpoint the run holds, with its writes, as its thread's head."""

    async def insert_write_set(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        stored: list[Document],
        replaces: bool,
    ) -> None:
        """Store writes of a checkpoint the run never put, as a write set of it."""


@dataclass
class Known:
    """A checkpoint as this run last read or wrote it (serialized, so LangGraph's later changes
    to its own objects never leak into what is read back)."""

    document: Document
    writes: list[Document] = field(default_factory=list)
    saver: HeldWriter | None = None
    """Set while the run holds a change of it not yet stored: stored when the run ends."""
    kept: bool = True
    """False for the copy a thread's turn starts from (services/sandbox/thread_base.py): a
    checkpoint of another thread, in that one's history already, so when a later checkpoint of
    the run replaces it, it is dropped rather than stored."""


@dataclass
class Run:
    """What one run knows of its threads: the newest checkpoint of each, and writes made to a
    checkpoint before its own put (LangGraph stores a run's last writes and checkpoint at exit,
    in either order, even concurrently)."""

    newest: dict[tuple[str, str], Known] = field(default_factory=dict)
    early: dict[tuple[str, str, str], Known] = field(default_factory=dict)
    heads: dict[tuple[str, str], Document | None] = field(default_factory=dict)
    """Heads this run read from the database (None: the thread had none)."""
    extra: Callable[[], dict[str, Any]] | None = None
    """What the run keeps with its thread's head (the sandbox's step index)."""
    guard: Callable[[dict[str, Any] | None], bool] | None = None
    """Given what the head this run's put replaced kept (``extra``), may this run's stand?"""
    ending: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Made when the run ends, together with the storing of what it holds (``run_scope``):
    the run's other last writes and checks, so its end costs one round trip, not one each."""


_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "interlock_checkpoint_run", default=None
)


def current_run() -> Run | None:
    """The run whose scope this is, if any."""
    return _run.get()


@contextlib.asynccontextmanager
async def run_scope(
    extra: Callable[[], dict[str, Any]] | None = None,
    guard: Callable[[dict[str, Any] | None], bool] | None = None,
) -> AsyncIterator[None]:
    """Within: the one run that owns its threads (the sandbox fences every other) reads each
    thread from the database at most once; its own writes are read back from memory, and
    stored when the block ends without an exception (its newest checkpoint with its pending
    writes, one command a thread; a block that raises stores nothing more: its run is fenced,
    or the database failed and the run will be retried). ``extra`` is called at each checkpoint
    the run stores, and what it returns is kept with the thread's head (``head_extra`` reads it
    back in the next run); ``guard`` is asked, at each of them, whether the run's checkpoint may
    replace the head it replaced (see the module docstring; ``Fenced`` when it may not). What
    the block asked for with ``at_the_end`` is made at the same time as that storing."""
    run = Run(extra=extra, guard=guard)
    token = _run.set(run)
    try:
        yield
        await _together(store_held(run), *(end() for end in run.ending))
    finally:
        _run.reset(token)


async def _together(*steps: Awaitable[None]) -> None:
    """All at once; each finishes before the first failure is raised."""
    for result in await asyncio.gather(*steps, return_exceptions=True):
        if isinstance(result, BaseException):
            raise result


def at_the_end(step: Callable[[], Awaitable[None]]) -> None:
    """Have the current run make ``step`` when it ends, with the storing of what it holds
    (outside a run: never, so callers make it themselves; see ``current_run``)."""
    run = _run.get()
    if run is None:
        raise RuntimeError("no run scope")
    run.ending.append(step)


async def store_held(run: Run) -> None:
    """Store what the run holds: each thread's newest checkpoint changed in the run, then the
    writes of checkpoints it never put (as write sets)."""
    for key, known in list(run.newest.items()):
        if known.saver is not None:
            await known.saver.write_head(run, key, known)
    early, run.early = run.early, {}
    for (thread_id, checkpoint_ns, checkpoint_id), known in early.items():
        if known.saver is not None and known.writes:
            await known.saver.insert_write_set(
                thread_id, checkpoint_ns, checkpoint_id, known.writes, replaces=True
            )


def known_to_be_new(thread_id: str, checkpoint_ns: str = "") -> None:
    """Tell the run that the thread has no checkpoint yet (its first attempt of its first run):
    the run's reads of it then cost nothing."""
    run = _run.get()
    if run is not None:
        run.heads.setdefault((thread_id, checkpoint_ns), None)


def head_extra(thread_id: str, checkpoint_ns: str = "") -> dict[str, Any] | None:
    """What the run that wrote the thread's newest checkpoint kept with it (``run_scope``'s
    ``extra``), as this run read it: ``{}`` when the thread has no checkpoint at all, None when
    this saver did not read the thread in this run or its head keeps nothing (written before,
    or by another saver)."""
    run = _run.get()
    if run is None or (thread_id, checkpoint_ns) not in run.heads:
        return None
    head = run.heads[(thread_id, checkpoint_ns)]
    if head is None:
        return {}
    kept = head.get("interlock")
    return dict(kept) if isinstance(kept, dict) else None
