"""The chaos workload's settle: it waits while executions move, and gives up on a run that
stopped moving (what is left is then the checker's "stuck")."""

from __future__ import annotations

import asyncio

import httpx

from tests.chaos.workload import Workload


def workload() -> Workload:
    return Workload(httpx.AsyncClient(), project="p", workspace="w")


async def test_settle_gives_up_once_nothing_moved_for_the_idle_time() -> None:
    load = workload()
    never = asyncio.create_task(asyncio.sleep(3600))
    load._tasks.append(never)
    await asyncio.wait_for(load.settle(600, idle=0.3), timeout=10)
    assert never.cancelled()


async def test_settle_keeps_waiting_while_executions_move() -> None:
    load = workload()

    async def draining() -> None:
        for _ in range(8):  # moves every 0.1 s for 0.8 s: longer than the idle time
            await asyncio.sleep(0.1)
            load.progressed()

    task = asyncio.create_task(draining())
    load._tasks.append(task)
    await asyncio.wait_for(load.settle(600, idle=0.3), timeout=10)
    assert task.done() and not task.cancelled()
