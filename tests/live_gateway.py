"""A gateway app served on a loopback port: streams arrive event by event (httpx's ASGI transport
would hand over a response only once it is complete)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import uvicorn

from tests.ports import free_port


@asynccontextmanager
async def served(http: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway app behind ``http`` on a loopback port, with the same headers."""
    transport = http._transport
    assert isinstance(transport, httpx.ASGITransport)
    port = free_port()
    config = uvicorn.Config(transport.app, host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(1000):
            if server.started:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the gateway did not start on loopback")
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=http.headers, timeout=10
        ) as client:
            yield client
    finally:
        server.should_exit = True
        await task
