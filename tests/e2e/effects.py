"""The loopback effects service (tests/e2e/effects_server.py) as its own process, and the client
the tests read its calls with."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import httpx

from tests.e2e.cluster import REPO
from tests.eventually import eventually
from tests.ports import free_port


class Effects:
    def __init__(self, *, delay_ms: int = 0) -> None:
        """``delay_ms``: each effect is answered this long after it is applied."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.effects_server", str(self.port), str(delay_ms)],
            cwd=REPO,
        )

    async def wait_ready(self) -> None:
        async def up() -> bool:
            try:
                async with httpx.AsyncClient() as client:
                    return (await client.get(f"{self.url}/calls")).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(up, bool, timeout=15, what="the effects service")

    async def calls(self) -> list[dict[str, Any]]:
        """Every call it got, in order: its idempotency key and whether it was applied."""
        async with httpx.AsyncClient(timeout=30) as client:
            return list((await client.get(f"{self.url}/calls")).json()["calls"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
