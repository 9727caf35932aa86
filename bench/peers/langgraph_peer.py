"""The floor: the same graph (``agents.bench_pipeline``) run by LangGraph in this process with
the services' checkpointer kind, resumed with ``Command(resume=...)``. No bus, no services, and
no step cache (durable steps are plain calls outside Interlock)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from agents.bench_pipeline import build_graph
from bench.load import Execution
from bench.peers.common import open_loop


@asynccontextmanager
async def mongo_saver(uri: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.mongodb import MongoDBSaver
    from pymongo import MongoClient

    client: MongoClient[Any] = MongoClient(uri, tz_aware=True)
    database = f"bench_peer_{uuid.uuid4().hex[:10]}"
    try:
        yield await asyncio.to_thread(MongoDBSaver, client, db_name=database)
    finally:
        client.drop_database(database)
        client.close()


@asynccontextmanager
async def sqlite_saver(workdir: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    path = workdir / f"langgraph-{uuid.uuid4().hex[:8]}.sqlite"
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


async def run(
    saver: BaseCheckpointSaver[Any], *, rate: float, count: int, message: str, timeout: float
) -> dict[str, Any]:
    graph = build_graph(saver)

    async def one(record: Execution) -> None:
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
        record.execution_id = config["configurable"]["thread_id"]
        record.invoked_at = time.time()
        # durability="sync", as the sandbox runs: a checkpoint is stored before the next step.
        first = await graph.ainvoke({"messages": [("user", message)]}, config, durability="sync")
        if "__interrupt__" not in first:
            raise RuntimeError("the graph ended without asking for a decision")
        record.suspended_at = record.decided_at = time.time()
        resume: Command[Any] = Command(resume={"decision": "approve"})
        final = await graph.ainvoke(resume, config, durability="sync")
        record.completed_at = time.time()
        record.resumed_at = final.get("resumed_at")
        record.replay_seconds = final.get("replay_seconds")
        record.status = "completed"

    return await open_loop(one, rate=rate, count=count, timeout=timeout)
