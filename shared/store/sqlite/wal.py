"""WAL checkpoints off the event loop, for a ``LoopConnection`` (``connection.py``).

In WAL mode a commit appends to the ``-wal`` file, and SQLite copies those pages back into the
database (a checkpoint, with its ``fsync``s) when the WAL reaches 1,000 pages, inside whichever
commit crosses the line. On the loop's thread that commit would stop every coroutine of
``interlock dev`` while it runs: measured at up to 38 ms, once every few hundred commits. So the
loop's connection turns its automatic checkpoint down to a safety net (``SAFETY_NET_PAGES``,
for a checkpointer that cannot keep up) and this one checkpoints on a worker thread, on a
connection of its own, every ``CHECKPOINT_SECONDS`` while something was written: ``PASSIVE``,
which waits for no reader or writer and lets the loop's commits go on meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

CHECKPOINT_SECONDS = 1.0
SAFETY_NET_PAGES = 20_000
"""The loop's own automatic checkpoint, should this one fall behind (about 80 MB of WAL)."""
JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
"""What a WAL file is cut back to once checkpointed past it (the busiest second's writes are
a few MB)."""
PRAGMAS = (
    f"PRAGMA wal_autocheckpoint = {SAFETY_NET_PAGES};"
    f" PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT_BYTES};"
)
"""For the loop's connection."""


class WalCheckpoints:
    """Checkpoints ``path``'s WAL on a worker thread while ``changes()`` (the loop connection's
    ``total_changes``) moves."""

    def __init__(
        self,
        path: str | Path,
        changes: Callable[[], int],
        *,
        busy_timeout_ms: int,
        seconds: float | None = None,
    ) -> None:
        self._path = str(path)
        self._changes = changes
        self._busy_timeout_ms = busy_timeout_ms
        self._seconds = CHECKPOINT_SECONDS if seconds is None else seconds
        self._connection: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._checkpointing: asyncio.Future[None] | None = None
        """The checkpoint running on its thread (which nothing can stop)."""

    def start(self) -> None:
        """Start checkpointing (on the running loop; again after ``stop``: a no-op while it
        runs)."""
        if self._task is None:
            # What is written from now on (the caller's next work included) is checkpointed.
            self._task = asyncio.create_task(self._run(self._changes()))

    async def _run(self, checkpointed: int) -> None:
        while True:
            await asyncio.sleep(self._seconds)
            changes = self._changes()
            if changes == checkpointed:
                continue
            self._checkpointing = asyncio.ensure_future(asyncio.to_thread(self._checkpoint))
            try:
                await asyncio.shield(self._checkpointing)
            except sqlite3.Error as exc:
                # The loop's safety net checkpoints meanwhile; the next round tries again.
                log.warning("sqlite.checkpoint_failed", file=self._path, error=repr(exc))
                continue
            checkpointed = changes

    def _checkpoint(self) -> None:
        if self._connection is None:
            self._connection = sqlite3.connect(
                self._path,
                isolation_level=None,
                timeout=self._busy_timeout_ms / 1000,
                check_same_thread=False,
            )
        self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    async def stop(self) -> None:
        """Stop, and close the checkpoints' connection (closing the last connection of the file
        checkpoints what is left)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._checkpointing is not None:
            # Its thread uses the connection until it returns: closed after it.
            await asyncio.wait([self._checkpointing])
            if not self._checkpointing.cancelled():
                self._checkpointing.exception()  # reported by the loop, if it was not stopped
            self._checkpointing = None
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await asyncio.to_thread(connection.close)
