"""DBOS Transact: the same shape as a workflow. N steps, an event saying it waits, ``DBOS.recv``
for the decision (sent with ``DBOS.send``), two more steps. One module for both of its system
databases: SQLite in the run's directory (``dbos-sqlite``), or a database of its own on a
PostgreSQL server (``dbos-postgres``); only the database and its notification knobs differ."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from bench.load import Execution
from bench.peers import postgres
from bench.peers.common import open_loop

SQLITE_POLL_SECONDS = 0.01
"""DBOS on SQLite has no LISTEN/NOTIFY: recv and get_event poll, every second by default. 10 ms
is DBOS's documented knob turned for latency (its CPU cost is counted like everything else). On
PostgreSQL they wait for notifications (DBOS's default there), so nothing is turned."""


@dataclass(frozen=True)
class SystemDatabase:
    """Where DBOS keeps its state for one run."""

    url: str
    settings: DBOSConfig = field(default_factory=lambda: DBOSConfig())
    """What this storage needs beyond DBOS's defaults."""
    shared_pids: dict[str, int] = field(default_factory=dict)
    """The database's server processes, shared with other users of the machine: their CPU is
    reported beside the peer's, never in it."""


@asynccontextmanager
async def on_sqlite(workdir: Path) -> AsyncIterator[SystemDatabase]:
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    yield SystemDatabase(
        url=f"sqlite:///{workdir / 'dbos.sqlite'}",
        settings={"notification_listener_polling_interval_sec": SQLITE_POLL_SECONDS},
    )


@asynccontextmanager
async def on_postgres(server: str | None) -> AsyncIterator[SystemDatabase]:
    """A fresh database on ``server`` (``postgres.Unavailable`` if there is none to reach),
    dropped after the run."""
    known = postgres.require(server)
    await postgres.check(known)
    async with postgres.fresh_database(known) as url:
        yield SystemDatabase(url=url, shared_pids=postgres.server_pids(known))


def config(database: SystemDatabase) -> DBOSConfig:
    settings: DBOSConfig = {
        "name": "interlock-bench",
        "system_database_url": database.url,
        "log_level": "WARNING",
    }
    settings.update(database.settings)
    return settings


@DBOS.step()
async def work(index: int) -> str:
    return f"done-{index}"


@DBOS.step()
async def stamp(label: str) -> float:
    return time.time()


@DBOS.workflow()
async def pipeline(steps: int) -> dict[str, Any]:
    for index in range(steps):
        await work(index)
    await DBOS.set_event_async("suspended", steps)
    decision = await DBOS.recv_async("decision", timeout_seconds=600)
    resumed_at = await stamp("after-decision-1")
    finished_at = await stamp("after-decision-2")
    return {"decision": decision, "resumed_at": resumed_at, "finished_at": finished_at}


async def run(
    database: SystemDatabase, *, rate: float, count: int, steps: int, timeout: float
) -> dict[str, Any]:
    DBOS(config=config(database))
    try:
        DBOS.launch()

        async def one(record: Execution) -> None:
            handle = await DBOS.start_workflow_async(pipeline, steps)
            record.execution_id = handle.workflow_id
            record.invoked_at = time.time()
            await DBOS.get_event_async(handle.workflow_id, "suspended", timeout_seconds=600)
            record.suspended_at = record.decided_at = time.time()
            await DBOS.send_async(handle.workflow_id, "approve", "decision")
            result = await handle.get_result()
            record.completed_at = time.time()
            record.resumed_at = result["resumed_at"]
            record.status = "completed"

        return await open_loop(
            one, rate=rate, count=count, timeout=timeout, shared_pids=database.shared_pids
        )
    finally:
        DBOS.destroy()  # before its database is dropped: its pool and listener hold connections
