"""The chaos workload's settle: it waits while executions move, and gives up on a run that
stopped moving (what is left is then the checker's "stuck")."""

from __future__ import annotations

import asyncio

import httpx

from tests.chaos.workload import MAX_IN_FLIGHT, Workload, client_limits


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


async def test_requests_past_the_in_flight_limit_wait_their_turn_outside_the_client() -> None:
    on_the_wire = 0
    most = 0
    release = asyncio.Event()
    slots_taken = asyncio.Event()

    async def slow_gateway(request: httpx.Request) -> httpx.Response:
        nonlocal on_the_wire, most
        on_the_wire += 1
        most = max(most, on_the_wire)
        if on_the_wire == MAX_IN_FLIGHT:
            slots_taken.set()
        await release.wait()
        on_the_wire -= 1
        return httpx.Response(200, json={})

    client = httpx.AsyncClient(transport=httpx.MockTransport(slow_gateway), base_url="http://gw")
    load = Workload(client, project="p", workspace="w")
    calls = [asyncio.create_task(load.call("GET", "/x")) for _ in range(MAX_IN_FLIGHT * 3)]
    await asyncio.wait_for(slots_taken.wait(), timeout=10)
    await asyncio.sleep(0.05)  # the others had every chance to be sent
    assert on_the_wire == MAX_IN_FLIGHT
    release.set()
    await asyncio.wait_for(asyncio.gather(*calls), timeout=10)
    assert most == MAX_IN_FLIGHT
    assert [r.status for r in load.http] == [200] * (MAX_IN_FLIGHT * 3)
    await client.aclose()


def test_the_client_keeps_a_connection_per_request_slot() -> None:
    limits = client_limits()
    assert limits.max_connections == limits.max_keepalive_connections == MAX_IN_FLIGHT
