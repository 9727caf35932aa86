"""One SQLite connection, on the event loop's thread (``connection.py``), opened on first use.

The connection is in autocommit mode and every write the adapter makes is a single statement,
which SQLite runs atomically: there are no multi-statement transactions but ``execute_many``'s
(begun and committed without awaiting), so coroutines sharing the connection cannot interleave
inside one, and other connections to the file (the CLI's ``interlock keys``, another store on
it) only ever wait for the write lock, up to the busy timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from shared.store.sqlite.connection import LoopConnection, transaction

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


class Database:
    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._connection: LoopConnection | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; return how many rows it changed."""
        connection = await self._connected()
        return await connection.run(lambda raw: raw.execute(sql, params).rowcount)

    async def execute_many(self, sql: str, rows: Iterable[Params]) -> None:
        """Run one statement per row, in one transaction: all the rows or none (one commit,
        not one per row)."""
        connection = await self._connected()
        batch = list(rows)
        if batch:
            await connection.run(lambda raw: transaction(raw, lambda t: t.executemany(sql, batch)))

    async def fetch_all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run one statement (a query, or a write with RETURNING) to completion."""
        connection = await self._connected()
        rows: list[sqlite3.Row] = await connection.run(
            lambda raw: raw.execute(sql, params).fetchall()
        )
        return rows

    async def fetch_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def execute_script(self, script: str) -> None:
        connection = await self._connected()
        await connection.run(lambda raw: raw.executescript(script))

    async def ping(self) -> None:
        await self.fetch_all("SELECT 1")

    async def close(self) -> None:
        self._closed = True
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()

    async def _connected(self) -> LoopConnection:
        # Opened here rather than in the constructor so that a store can be built before the
        # event loop runs, like MongoStore.connect (services build clients in create_app).
        if self._closed:
            raise RuntimeError("the store is closed")
        if self._connection is None:
            async with self._opening:
                if self._connection is None:
                    self._connection = await asyncio.to_thread(self._open)
        return self._connection

    def _open(self) -> LoopConnection:
        make_private(self._path)
        connection = LoopConnection.open(self._path, busy_timeout_ms=self._busy_timeout_ms)
        connection.raw.row_factory = sqlite3.Row
        return connection
