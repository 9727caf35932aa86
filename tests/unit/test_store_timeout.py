"""A database that stops answering costs an operation at most ``INTERLOCK_MONGODB_TIMEOUT_MS``:
the store raises (the gateway answers 503, a consumer retries) instead of waiting on it. The
"database" here accepts connections and never answers, as a saturated or frozen one does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pymongo.errors import PyMongoError

from shared.store.mongo import MongoStore


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"mongodb://127.0.0.1:{port}/?directConnection=true"
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_an_operation_on_a_silent_database_fails_within_the_timeout(
    silent_server: str,
) -> None:
    store = MongoStore.connect(silent_server, "silent", timeout_ms=60_000, operation_timeout_ms=300)
    try:
        with pytest.raises(PyMongoError):
            # The guard is far above the timeout: reaching it means the operation hung.
            await asyncio.wait_for(store.executions.get("p", "e"), timeout=20)
    finally:
        await store.close()


async def test_without_the_timeout_the_same_operation_is_still_waiting(
    silent_server: str,
) -> None:
    store = MongoStore.connect(silent_server, "silent", timeout_ms=60_000)
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.executions.get("p", "e"), timeout=2)
    finally:
        await store.close()
