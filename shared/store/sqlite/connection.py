"""One SQLite connection used on the event loop's own thread, with a worker thread only when
another connection holds the file's write lock.

Why not a thread per statement (aiosqlite): a point statement on a local file takes SQLite 5 to
50 microseconds, and handing it to a worker thread and its result back to the loop costs about
200 microseconds of CPU (a queue put, a thread wake-up, the GIL handed over and back, the loop's
self-pipe), several times the statement itself. ``interlock dev`` makes a hundred-odd
statements per execution on its three files, so the hops were a third of its CPU.

Why the loop can run them: every statement here is short (point reads and writes by key, and
bounded ranges), the journal is WAL with ``synchronous=NORMAL`` (a commit appends to the WAL and
does not wait for the disk), and in one process there is nothing to wait for: the loop runs one
statement at a time, in autocommit mode (or in a transaction that ``run`` begins and ends
without awaiting), so no connection of the process is ever inside a transaction while another
one starts. Only another process can hold a lock (the CLI's ``interlock keys create`` on the
store file, someone inspecting a file by hand): the loop's statement then fails at once
(``busy_timeout`` 0 on this thread) without having changed anything, and the same work is run
again on a worker thread that waits up to the busy timeout, as aiosqlite did. While it waits,
the connection's later work queues behind it, in order; a busy timeout that runs out is the
retryable ``StoreUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from shared.errors import is_transient
from shared.store.errors import StoreUnavailable
from shared.store.sqlite import wal
from shared.store.sqlite.wal import WalCheckpoints

T = TypeVar("T")

Work = Callable[[sqlite3.Connection], T]
"""What ``run`` does with the connection: statements that either all took effect, or, when one
raised, none did (one autocommit statement, or a ``transaction``)."""


def is_busy(exc: BaseException) -> bool:
    """Another connection held the lock: the same work may succeed later (the one retry rule's
    judgement, ``shared.errors.is_transient``)."""
    return isinstance(exc, sqlite3.OperationalError) and is_transient(exc)


@contextlib.contextmanager
def busy_is_retryable() -> Iterator[None]:
    """The busy timeout ran out: a ``StoreUnavailable``, which the consumers retry rather than
    dead-letter."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_transient(exc):
            raise StoreUnavailable(f"database is busy: {exc}") from exc
        raise


def transaction(connection: sqlite3.Connection, work: Work[T]) -> T:
    """``work`` in one write transaction: it all commits, or, when it raises, none of it does.
    ``BEGIN IMMEDIATE`` takes the write lock first, so a busy file fails here, before anything is
    written, and never with a read snapshot that a write would then find stale."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


class LoopConnection:
    """A sqlite3 connection in autocommit mode, used on the event loop's thread (``run``)."""

    def __init__(
        self, connection: sqlite3.Connection, *, busy_timeout_ms: int, wal: WalCheckpoints
    ) -> None:
        self.raw = connection
        """The connection itself, for work that ``run`` hands it (never used elsewhere)."""
        self._busy_timeout_ms = busy_timeout_ms
        self._aside: asyncio.Future[None] | None = None
        """Work waiting out another connection's lock on a worker thread: what comes after it
        waits for it."""
        self._wal = wal
        self._checkpointing = False

    @classmethod
    def open(cls, path: str | Path, *, busy_timeout_ms: int, pragmas: str = "") -> LoopConnection:
        """Open ``path`` in autocommit mode, WAL with ``synchronous=NORMAL`` (durable through a
        crash of the process; a power cut may lose the last commits, which the development mode
        these files are for can afford), then ``pragmas``. Opening waits out a lock as work
        does: it is done once, at start-up."""
        # check_same_thread=False: the busy path runs work on a worker thread, never while the
        # loop runs any (``run`` keeps them in order).
        connection = sqlite3.connect(
            str(path),
            isolation_level=None,
            timeout=busy_timeout_ms / 1000,
            check_same_thread=False,
        )
        try:
            with busy_is_retryable():
                connection.executescript(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                    f" {wal.PRAGMAS} {pragmas}"
                )
            connection.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            connection.close()
            raise
        checkpoints = wal.WalCheckpoints(
            path, lambda: connection.total_changes, busy_timeout_ms=busy_timeout_ms
        )
        return cls(connection, busy_timeout_ms=busy_timeout_ms, wal=checkpoints)

    async def run(self, work: Work[T]) -> T:
        """Do ``work`` now, on this thread; if another connection holds the lock, on a worker
        thread that waits for it up to the busy timeout (``StoreUnavailable`` past it)."""
        if not self._checkpointing:  # on the loop now: the WAL's checkpoints can start
            self._checkpointing = True
            self._wal.start()
        while self._aside is not None:
            # In order behind the work that waits (never cancelled by our cancellation: it runs
            # on, and the work after it must still wait for it).
            await asyncio.wait([self._aside])
        try:
            return work(self.raw)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            if self.raw.in_transaction:  # a script's own BEGIN, say: nothing of it stays
                self.raw.execute("ROLLBACK")
        return await self._aside_run(work)

    async def _aside_run(self, work: Work[T]) -> T:
        outcome: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(self._waiting, work))
        self._aside = aside = asyncio.get_running_loop().create_future()

        def done(_: asyncio.Future[T]) -> None:
            if not outcome.cancelled():
                outcome.exception()  # read here too: whoever waited for it may be gone
            aside.set_result(None)
            if self._aside is aside:
                self._aside = None

        outcome.add_done_callback(done)
        with busy_is_retryable():
            # Shielded: a cancelled caller leaves the thread's work to finish (it cannot be
            # stopped), and the work queued behind it waits for that, not for the caller.
            return await asyncio.shield(outcome)

    def _waiting(self, work: Work[T]) -> T:
        self.raw.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        try:
            return work(self.raw)
        finally:
            self.raw.execute("PRAGMA busy_timeout = 0")

    async def close(self) -> None:
        await self._wal.stop()
        while self._aside is not None:
            await asyncio.wait([self._aside])
        self.raw.close()  # the file's last connection: it checkpoints what is left
