"""The embedded mode's SQLite connections run on the event loop (shared/store/sqlite/
connection.py): their WAL is checkpointed on a worker thread (wal.py), never inside one of the
loop's commits, and a file another process holds locked is waited for off the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from shared.errors import RetryableError
from shared.store.sqlite import wal
from shared.store.sqlite.connection import LoopConnection
from tests.eventually import eventually

ROW = b"x" * 3000


def fill(raw: sqlite3.Connection, rows: int) -> None:
    raw.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB)")
    for _ in range(rows):
        raw.execute("INSERT INTO t (body) VALUES (?)", (ROW,))


async def test_the_loop_never_checkpoints_and_the_worker_thread_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal, "CHECKPOINT_SECONDS", 0.01)
    path = tmp_path / "f.sqlite"
    connection = LoopConnection.open(path, busy_timeout_ms=1000)
    try:
        [(pages,)] = connection.raw.execute("PRAGMA wal_autocheckpoint").fetchall()
        assert pages == wal.SAFETY_NET_PAGES  # the loop's commits leave the WAL alone
        await connection.run(lambda raw: fill(raw, 1500))  # past SQLite's default 1,000 pages
        # The rows are in the WAL, and the database file has them once the worker thread has
        # checkpointed it.
        await eventually(
            lambda: asyncio.to_thread(lambda: path.stat().st_size),
            lambda size: size > 1500 * len(ROW),
            what="the WAL checkpointed into the file",
        )
    finally:
        await connection.close()
    with sqlite3.connect(path) as reopened:
        assert reopened.execute("SELECT COUNT(*) FROM t").fetchone() == (1500,)


async def test_a_lock_held_elsewhere_is_waited_for_off_the_loop_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.sqlite"
    connection = LoopConnection.open(path, busy_timeout_ms=5000)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await connection.run(lambda raw: fill(raw, 1))
        holder.execute("BEGIN IMMEDIATE")  # another process writing, say
        first = asyncio.create_task(connection.run(lambda raw: fill(raw, 1)))
        second = asyncio.create_task(
            connection.run(lambda raw: raw.execute("SELECT COUNT(*) FROM t").fetchone())
        )
        for _ in range(5):  # the loop runs on while both wait
            await asyncio.sleep(0)
        assert not first.done() and not second.done()  # the read waits behind the write
        holder.execute("ROLLBACK")
        await first
        assert await second == (2,)
    finally:
        holder.close()
        await connection.close()


async def test_a_lock_held_past_the_busy_timeout_is_a_retryable_error(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    connection = LoopConnection.open(path, busy_timeout_ms=50)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        await connection.run(lambda raw: fill(raw, 1))
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(RetryableError, match="busy"):
            await connection.run(lambda raw: fill(raw, 1))
        holder.execute("ROLLBACK")
        await connection.run(lambda raw: fill(raw, 1))  # and the connection goes on
    finally:
        holder.close()
        await connection.close()
