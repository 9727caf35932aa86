"""A receiver of runs' webhooks on loopback, for the flows: it keeps every request as it came
(body and headers), answers 204, and lets a flow wait until so many have arrived."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.notifier.channels.webhook import parse_secret, sign
from tests.eventually import eventually
from tests.ports import free_port

SECRET = "whsec_aW50ZXJsb2NrLWUyZS1ydW4td2ViaG9vay1zZWNyZXQ="
"""What the services under test sign runs' webhooks with (``INTERLOCK_RUN_WEBHOOK_SECRETS``)."""
ENV = {
    "INTERLOCK_RUN_WEBHOOK_SECRETS": SECRET,
    "INTERLOCK_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
}
"""The settings a target needs for the webhook flow: signed, and a receiver on loopback."""


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]

    @property
    def json(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    def signed(self) -> bool:
        """Does the Standard Webhooks signature verify with ``SECRET``?"""
        expected = sign(
            parse_secret(SECRET),
            self.headers["webhook-id"],
            int(self.headers["webhook-timestamp"]),
            self.body,
        )
        return expected in self.headers.get("webhook-signature", "").split(" ")


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        async with asyncio.timeout(timeout):
            while len(self.received) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return list(self.received)


@asynccontextmanager
async def webhook_receiver() -> AsyncIterator[Receiver]:
    port = free_port()
    receiver = Receiver(url=f"http://127.0.0.1:{port}/run-ended")

    async def take(request: Request) -> Response:
        receiver.received.append(Received(await request.body(), dict(request.headers)))
        receiver.arrived.set()
        return Response(status_code=204)

    app = Starlette(routes=[Route("/run-ended", take, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            return server.started

        await eventually(started, bool, timeout=10, interval=0.02, what="the receiver to listen")
        yield receiver
    finally:
        server.should_exit = True
        await serving
