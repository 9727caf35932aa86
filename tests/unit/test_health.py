"""The consumers' health endpoints: liveness always answers, readiness says what failed."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from shared.bus import create_broker
from shared.health import HealthServer, health_app
from shared.settings import CommonSettings
from tests.ports import free_port

DEBUG_TOKEN = "debug-token-of-the-operators"
DEBUG_AUTHORIZATION = {"Authorization": f"Bearer {DEBUG_TOKEN}"}


async def ok() -> None:
    return None


async def down() -> None:
    raise ConnectionError("no route to the broker")


async def test_ready_when_every_check_passes_and_says_which_failed_otherwise() -> None:
    transport = httpx.ASGITransport(app=health_app({"kafka": ok, "database": ok}))
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ready"}
    transport = httpx.ASGITransport(app=health_app({"kafka": down, "database": ok}))
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        assert (await client.get("/healthz")).status_code == 200  # alive all the same
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json() == {
            "status": "unavailable",
            "failed": {"kafka": "ConnectionError: no route to the broker"},
        }


async def test_readiness_says_what_the_service_reports_beside_its_status() -> None:
    """The sandbox stays ready with an agent it cannot load (the others serve) and says which."""
    unloadable: dict[str, object] = {}
    app = health_app({"kafka": ok}, details=lambda: unloadable)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        unloadable["agents_unloadable"] = {"broken": "cannot import ./broken.py:graph"}
        response = await client.get("/readyz")
        assert response.status_code == 200
        assert response.json() == {
            "status": "ready",
            "agents_unloadable": {"broken": "cannot import ./broken.py:graph"},
        }


async def test_debug_tasks_names_each_task_and_the_line_it_waits_on() -> None:
    gate = asyncio.Event()

    async def waits_for_the_gate() -> None:
        await gate.wait()

    waiter = asyncio.create_task(waits_for_the_gate(), name="the-waiter")
    await asyncio.sleep(0)
    transport = httpx.ASGITransport(app=health_app({}, debug_tasks_token=DEBUG_TOKEN))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
            response = await client.get("/debug/tasks", headers=DEBUG_AUTHORIZATION)
    finally:
        gate.set()
        await waiter
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    listing = response.text.split("\n--- the-waiter\n", 1)[1].split("\n--- ", 1)[0]
    assert "waits_for_the_gate" in listing
    assert "Event.wait" in listing


async def test_the_server_serves_on_its_port_and_stops() -> None:
    port = free_port()
    server = HealthServer("127.0.0.1", port, {"database": ok})
    await server.start()
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"http://127.0.0.1:{port}/readyz")
        assert response.json() == {"status": "ready"}
    finally:
        await server.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/healthz")


async def test_a_port_in_use_fails_the_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = HealthServer("127.0.0.1", taken.getsockname()[1], {})
        with pytest.raises(OSError, match="cannot listen"):
            await server.start()


def test_the_graceful_timeout_setting_reaches_the_broker() -> None:
    # How long a stopping consumer lets its message in hand finish (the sandbox's manifest
    # raises it to 110 s under a 120 s termination grace period).
    broker = create_broker(CommonSettings(graceful_timeout_seconds=110), "test")
    assert broker.config.graceful_timeout == 110
