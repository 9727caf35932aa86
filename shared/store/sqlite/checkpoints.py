"""LangGraph's SQLite checkpoints for ``interlock dev``, on the event loop's thread.

LangGraph's ``SqliteSaver`` (its synchronous saver: the same tables, rows and serialization as
its ``AsyncSqliteSaver``, so a data folder written by either reads with the other) with its async
methods answered by its sync ones through a ``LoopConnection`` (``connection.py``): no thread hop
per statement (``AsyncSqliteSaver`` goes through aiosqlite), and a worker thread only while
another process holds the file's lock. Every write is one transaction (``BEGIN IMMEDIATE``), the
pending writes of a task included, where the sync saver in autocommit mode would commit row by
row.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from shared.store.sqlite.connection import LoopConnection
from shared.store.sqlite.database import BUSY_TIMEOUT_MS, make_private


class LoopSqliteSaver(SqliteSaver):
    def __init__(self, connection: LoopConnection) -> None:
        super().__init__(connection.raw)
        self._loop_connection = connection

    @classmethod
    @asynccontextmanager
    async def open(
        cls, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> AsyncIterator[LoopSqliteSaver]:
        """The saver on the file ``path`` (made private first), its tables created."""

        def opened() -> LoopConnection:
            make_private(path)
            return LoopConnection.open(path, busy_timeout_ms=busy_timeout_ms)

        connection = await asyncio.to_thread(opened)
        try:
            saver = cls(connection)
            await connection.run(lambda _: saver.setup())
            yield saver
        finally:
            await connection.close()

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """The sync saver's cursor, on a connection in autocommit mode: a write is one
        transaction, begun here and committed (or rolled back) when the block ends."""
        with self.lock:
            self.setup()
            cursor = self.conn.cursor()
            try:
                if transaction:
                    self.conn.execute("BEGIN IMMEDIATE")
                yield cursor
                if transaction:
                    self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            finally:
                cursor.close()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._loop_connection.run(lambda _: self.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Read whole, then handed out: the loop never waits between rows with a cursor open.
        found = await self._loop_connection.run(
            lambda _: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._loop_connection.run(
            lambda _: self.put(config, checkpoint, metadata, new_versions)
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._loop_connection.run(
            lambda _: self.put_writes(config, writes, task_id, task_path)
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self._loop_connection.run(lambda _: self.delete_thread(thread_id))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await self._loop_connection.run(
            lambda _: self.get_delta_channel_history(config=config, channels=channels)
        )
