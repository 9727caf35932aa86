"""What the contract suites cannot show about the SQLite store: the file outlives the
connection, and the services of ``interlock dev`` share it through separate connections."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shared.domain.execution import ExecutionStatus
from shared.errors import RetryableError
from shared.store.api_keys import Role, authenticate, create_key
from shared.store.ports import StepRecord
from shared.store.sqlite import SqliteStore
from shared.store.sqlite.executions import Parsed
from tests import factories as f

OpenStores = Callable[[int], AbstractAsyncContextManager[list[SqliteStore]]]


@pytest.fixture
def open_stores(tmp_path: Path) -> OpenStores:
    """``n`` stores on one file, as the four services of ``interlock dev`` each open their own."""

    @asynccontextmanager
    async def opened(n: int) -> AsyncIterator[list[SqliteStore]]:
        async with AsyncExitStack() as stack:
            stores = []
            for _ in range(n):
                store = await SqliteStore.open(tmp_path / "interlock.db")
                stack.push_async_callback(store.close)
                stores.append(store)
            yield stores

    return opened


async def test_data_survives_closing_and_reopening_the_file(open_stores: OpenStores) -> None:
    execution = f.pending("exec-durable")
    step = StepRecord(
        key="exec-durable:charge:1",
        execution_id="exec-durable",
        name="charge",
        result='{"id": 7}',
        epoch=1,
        attempt=1,
    )
    async with open_stores(1) as [store]:
        created, _ = await store.executions.create(execution)
        running = created.model_copy(update={"status": ExecutionStatus.RUNNING})
        assert await store.executions.replace(created, running) is not None
        await store.steps.put(step)
        key, secret = await create_key(store.api_keys, project_id="p1", role=Role.OWNER, name="k")

    async with open_stores(1) as [reopened]:
        stored = await reopened.executions.get("proj-1", "exec-durable")
        assert stored == running.model_copy(update={"version": 2})
        assert await reopened.steps.load("exec-durable") == {step.key: step}
        assert await authenticate(reopened.api_keys, secret) == key
        # The compare-and-set goes on from the stored version.
        assert await reopened.executions.replace(created, running) is None
        assert stored is not None
        assert await reopened.executions.replace(stored, running) is not None


async def test_concurrent_replaces_through_several_connections_have_one_winner(
    open_stores: OpenStores,
) -> None:
    async with open_stores(4) as stores:
        for round_ in range(10):
            execution, _ = await stores[0].executions.create(f.pending(f"exec-race-{round_}"))
            candidates = [
                execution.model_copy(update={"requested_by": f"writer-{i}"}) for i in range(32)
            ]
            results = await asyncio.gather(
                *(
                    stores[i % len(stores)].executions.replace(execution, c)
                    for i, c in enumerate(candidates)
                )
            )
            won = [i for i, r in enumerate(results) if r is not None]
            assert len(won) == 1, f"round {round_}: {results}"
            winner = candidates[won[0]]
            for store in stores:
                stored = await store.executions.get("proj-1", execution.execution_id)
                assert stored is not None and stored.version == 2
                assert stored.requested_by == winner.requested_by


async def test_a_database_locked_for_too_long_is_a_retryable_error(tmp_path: Path) -> None:
    path = tmp_path / "interlock.db"
    store = await SqliteStore.open(path, busy_timeout_ms=50)
    # Another process holding the write lock, e.g. someone inspecting the file by hand.
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(RetryableError, match="busy"):
            await store.executions.create(f.pending("exec-locked"))
        holder.execute("ROLLBACK")
        _, created = await store.executions.create(f.pending("exec-locked"))
        assert created
    finally:
        holder.close()
        await store.close()


def test_a_stored_text_is_parsed_once_and_kept_by_recent_use() -> None:
    parsed = Parsed(kept=2)
    first = f.pending("exec-parsed-1").model_copy(update={"version": 1})
    text = first.model_dump_json()
    assert parsed(text) == first
    assert parsed(text) is parsed(text)  # the second read is the first one's instance
    second = first.model_copy(update={"version": 2, "status": ExecutionStatus.RUNNING})
    assert parsed(second.model_dump_json()).version == 2  # another text, another execution
    kept = parsed(text)
    parsed(f.pending("exec-parsed-2").model_dump_json())  # the oldest (version 2) goes
    assert parsed(text) is kept


async def test_reads_of_an_unchanged_execution_answer_what_was_written(
    open_stores: OpenStores,
) -> None:
    async with open_stores(2) as [writer, reader]:
        created, _ = await writer.executions.create(f.pending("exec-reread"))
        running = created.model_copy(update={"status": ExecutionStatus.RUNNING})
        stored = await writer.executions.replace(created, running)
        assert stored is not None
        assert await writer.executions.get("proj-1", "exec-reread") is stored
        # Another connection's store parses what the writer stored, and keeps it.
        read = await reader.executions.get("proj-1", "exec-reread")
        assert read == stored
        assert await reader.executions.get("proj-1", "exec-reread") is read
        page = await reader.executions.list("proj-1", stored.workspace_id)
        assert page.items == [read] and page.items[0] is read
        # A later version is read as itself, never answered from the one kept.
        ended = stored.model_copy(update={"status": ExecutionStatus.COMPLETED})
        assert await writer.executions.replace(stored, ended) is not None
        latest = await reader.executions.get("proj-1", "exec-reread")
        assert latest is not None and latest.status is ExecutionStatus.COMPLETED


async def test_the_sweeps_reads_by_status_seek_an_index_not_scan_every_execution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They run on the event loop every few seconds: a scan of every execution's row stops the
    whole of ``interlock dev`` for as long as the history is long."""
    ran: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened: sqlite3.Connection = connect(*args, **kwargs)
        opened.set_trace_callback(ran.append)  # each statement as run, its values in it
        return opened

    monkeypatch.setattr(sqlite3, "connect", traced)
    store = await SqliteStore.open(tmp_path / "interlock.db")
    try:
        ran.clear()
        await store.executions.due_deadlines(datetime.now(UTC))
        await store.executions.undelivered_before(datetime.now(UTC))
        await store.executions.count_live_by_status()
    finally:
        await store.close()
    reads = [sql for sql in ran if sql.startswith("SELECT")]
    assert len(reads) == 3, ran
    with contextlib.closing(connect(tmp_path / "interlock.db")) as db:
        for sql in reads:
            plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "executions_by_status" in plan and "SCAN executions" not in plan, (sql, plan)
