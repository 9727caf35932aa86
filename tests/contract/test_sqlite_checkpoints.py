"""The embedded mode's checkpoints (shared/store/sqlite/checkpoints.py): LangGraph's conformance
suite for savers, a data folder written by LangGraph's ``AsyncSqliteSaver`` (the saver of the
releases before) read back, and a file another process holds locked waited for off the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from shared.store.sqlite.checkpoints import LoopSqliteSaver


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


async def test_it_passes_langgraphs_conformance_suite(tmp_path: Path) -> None:
    opened = 0

    @checkpointer_test(name="LoopSqliteSaver")
    async def saver() -> AsyncIterator[LoopSqliteSaver]:
        nonlocal opened
        opened += 1
        async with LoopSqliteSaver.open(tmp_path / f"checkpoints-{opened}.sqlite") as it:
            yield it

    report = await validate(saver)
    report.print_report()
    assert report.passed_all_base()


async def test_what_the_async_sqlite_saver_wrote_is_read_and_continued(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    first = empty_checkpoint()
    async with AsyncSqliteSaver.from_conn_string(str(path)) as before:
        stored = await before.aput(config("t1"), first, {"step": 1}, {})
        await before.aput_writes(stored, [("messages", "hello")], task_id="task-1")

    async with LoopSqliteSaver.open(path) as saver:
        found = await saver.aget_tuple(config("t1"))
        assert found is not None
        assert found.checkpoint["id"] == first["id"]
        assert found.metadata["step"] == 1
        assert [(task, channel, value) for task, channel, value in found.pending_writes or []] == [
            ("task-1", "messages", "hello")
        ]
        second = empty_checkpoint()
        await saver.aput(stored, second, {"step": 2}, {})
        listed = [t.checkpoint["id"] async for t in saver.alist(config("t1"))]
        assert listed == [second["id"], first["id"]]

    async with AsyncSqliteSaver.from_conn_string(str(path)) as after:  # and back again
        latest = await after.aget_tuple(config("t1"))
        assert latest is not None and latest.checkpoint["id"] == second["id"]


async def test_a_file_locked_by_another_process_is_waited_for_off_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    async with LoopSqliteSaver.open(path) as saver:
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # someone inspecting the file by hand, say
        try:
            put = asyncio.create_task(saver.aput(config("t2"), empty_checkpoint(), {}, {}))
            ticks = 0
            while ticks < 5:  # the loop runs on while the put waits for the lock
                await asyncio.sleep(0)
                ticks += 1
            assert not put.done()
            holder.execute("ROLLBACK")
            await put
        finally:
            holder.close()
        assert await saver.aget_tuple(config("t2")) is not None
