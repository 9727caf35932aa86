"""One SQLite connection (through aiosqlite's worker thread), opened on first use.

The connection is in autocommit mode and every write the adapter makes is a single statement,
which SQLite runs atomically: there are no multi-statement transactions, so coroutines sharing
the connection cannot interleave inside one, and other connections to the file (the other
services of ``interlock dev``) only ever wait for the write lock, up to the busy timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from shared.errors import is_transient
from shared.store.errors import StoreUnavailable

Params = Sequence[Any]

BUSY_TIMEOUT_MS = 5_000
PRIVATE_FILE = 0o600
"""The mode of the store's files: they hold executions, audit trails and key hashes."""
SIDE_FILES = ("-wal", "-shm", "-journal")


def make_private(path: str | Path) -> None:
    """Create the SQLite file ``path`` readable and writable by its owner only, or take an
    existing one (and the journals beside it) down to that. SQLite would create it 0644, and
    creates its WAL and shared-memory files with the mode of the database file, so a file made
    here keeps them private too. An in-memory or URI path names no file of ours: left alone."""
    name = str(path)
    if name in ("", ":memory:") or name.startswith("file:"):
        return
    descriptor = os.open(name, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE)
    finally:
        os.close(descriptor)
    for suffix in SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name + suffix, PRIVATE_FILE)


@contextlib.contextmanager
def _busy_is_retryable() -> Iterator[None]:
    """Another connection held the write lock for longer than the busy timeout: the same
    operation can succeed later, so the bus should retry it rather than dead-letter it. What
    counts as busy is the one retry rule's (``shared.errors.is_transient``)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_transient(exc):
            raise StoreUnavailable(f"database is busy: {exc}") from exc
        raise


class Database:
    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._connection: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; return how many rows it changed."""
        connection = await self._connected()
        with _busy_is_retryable():
            async with connection.execute(sql, params) as cursor:
                return cursor.rowcount

    async def execute_many(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement per row, each committed on its own: for writes where a batch cut
        short and retried does no harm (inserts that skip rows already there)."""
        connection = await self._connected()
        with _busy_is_retryable():
            async with connection.executemany(sql, rows):
                pass

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run one statement (a query, or a write with RETURNING) to completion."""
        connection = await self._connected()
        with _busy_is_retryable():
            return list(await connection.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def execute_script(self, script: str) -> None:
        connection = await self._connected()
        with _busy_is_retryable():
            async with connection.executescript(script):
                pass

    async def ping(self) -> None:
        await self.fetch_all("SELECT 1")

    async def close(self) -> None:
        self._closed = True
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()

    async def _connected(self) -> aiosqlite.Connection:
        # Opened here rather than in the constructor so that a store can be built before the
        # event loop runs, like MongoStore.connect (services build clients in create_app).
        if self._closed:
            raise RuntimeError("the store is closed")
        if self._connection is None:
            async with self._opening:
                if self._connection is None:
                    self._connection = await self._open()
        return self._connection

    async def _open(self) -> aiosqlite.Connection:
        await asyncio.to_thread(make_private, self._path)
        with _busy_is_retryable():
            # isolation_level=None: autocommit. Python's default would open a transaction
            # before every write and hold the file's write lock until an explicit commit.
            connection = await aiosqlite.connect(
                self._path, isolation_level=None, timeout=self._busy_timeout_ms / 1000
            )
            connection.row_factory = sqlite3.Row
            try:
                # WAL: readers and the writer do not block each other. synchronous=NORMAL is
                # durable through a crash of the process; a power cut may lose the last
                # commits, which the development mode this store is for can afford.
                await connection.executescript(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                )
            except BaseException:
                await connection.close()
                raise
        return connection
