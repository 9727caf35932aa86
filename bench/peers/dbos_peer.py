"""DBOS Transact on its SQLite system database: the same shape as a workflow. N steps, an event
saying it waits, ``DBOS.recv`` for the decision (sent with ``DBOS.send``), two more steps."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

from bench.load import Execution
from bench.peers.common import open_loop

# DBOS on SQLite has no LISTEN/NOTIFY: recv and get_event poll, every second by default. 10 ms
# is DBOS's documented knob turned for latency (its CPU cost is counted like everything else).
POLL_SECONDS = 0.01


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
    workdir: Path, *, rate: float, count: int, steps: int, timeout: float
) -> dict[str, Any]:
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    config: DBOSConfig = {
        "name": "interlock-bench",
        "system_database_url": f"sqlite:///{workdir / 'dbos.sqlite'}",
        "log_level": "WARNING",
        "notification_listener_polling_interval_sec": POLL_SECONDS,
    }
    DBOS(config=config)
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

    try:
        return await open_loop(one, rate=rate, count=count, timeout=timeout)
    finally:
        DBOS.destroy()
