"""In embedded mode (``interlock dev``: SQLite store, in-process bus), a step store that is busy
when a durable step stores its result is a dependency failing, not the agent: the run is raised
to the bus, which delivers the dispatch again, and the retried run goes on (issue 22)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.dev import DevSettings
from services.gateway import app as gateway_app
from services.gateway.app import create_app
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import publish_agent_versions
from services.sandbox.app import register as register_sandbox
from shared.inprocess_bus import InProcessBus
from shared.store.api_keys import Role, create_key
from shared.store.errors import StoreUnavailable
from shared.store.ports import StepRecord, StepStore
from shared.store.sqlite import SqliteStore
from shared.store.sqlite.checkpoints import LoopSqliteSaver
from tests.eventually import eventually

API = "/api/v1/projects/demo"
BUSY_TIMEOUT_MS = 100
"""How long the store waits for the lock before it gives up (``interlock dev`` waits 5 s)."""


@dataclass
class BusyOnce:
    """The SQLite step store, with another connection holding the file's write lock during the
    first ``put``: the real adapter waits out its busy timeout and raises."""

    steps: StepStore
    path: Path
    raised: list[BaseException] = field(default_factory=list)

    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        return await self.steps.load(execution_id)

    async def get(self, key: str) -> StepRecord | None:
        return await self.steps.get(key)

    async def put(self, record: StepRecord) -> StepRecord:
        if self.raised:
            return await self.steps.put(record)
        holder = sqlite3.connect(self.path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            return await self.steps.put(record)
        except StoreUnavailable as exc:
            self.raised.append(exc)
            raise
        finally:
            holder.close()  # rolls back: the lock is free for the retry


@asynccontextmanager
async def dev_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, BusyOnce]]:
    """The wiring of ``interlock dev`` (interlock/dev.py ``embedded``), with a short busy
    timeout and the busy step store."""
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = DevSettings(data_dir=tmp_path, kafka_bootstrap_servers="unused:9092")
    async with AsyncExitStack() as stack:
        path = tmp_path / "interlock.sqlite"
        store = await SqliteStore.open(path, busy_timeout_ms=BUSY_TIMEOUT_MS)
        stack.push_async_callback(store.close)
        busy = BusyOnce(store.steps, path)
        store.steps = busy  # type: ignore[assignment]
        checkpointer = await stack.enter_async_context(
            LoopSqliteSaver.open(tmp_path / "checkpoints.sqlite")
        )
        bus = InProcessBus(tmp_path / "bus.sqlite")
        register_orchestrator(
            bus, settings, store, bus, erase_checkpoints=saver_eraser(checkpointer)
        )
        _, graphs = register_sandbox(bus, settings, store, bus, checkpointer)
        await publish_agent_versions(graphs, store)
        _, key = await create_key(store.api_keys, project_id="demo", role=Role.OWNER, name="t")
        app = create_app(settings, store=store, publisher=bus)
        await bus.start()
        stack.push_async_callback(bus.stop)
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://gateway",
                headers={"Authorization": f"Bearer {key}"},
            )
        )
        yield http, busy


async def test_a_busy_step_store_retries_the_run_instead_of_failing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with dev_mode(tmp_path, monkeypatch) as (http, busy):
        invoked = await http.post(
            f"{API}/workspaces/default/invoke",
            json={"agent": "bench-pipeline", "message": "steps=2"},
        )
        assert invoked.status_code == 202, invoked.text
        execution_id = invoked.json()["execution_id"]

        async def execution() -> dict[str, Any]:
            response = await http.get(
                f"{API}/executions/{execution_id}", params={"workspace_id": "default"}
            )
            return dict(response.json())

        # Before the fix the runner took the busy store for the agent's own failure: the
        # execution ended in "error" with error_type StoreUnavailable.
        body = await eventually(
            execution,
            lambda b: b["status"] in ("suspended", "error"),
            what=f"{execution_id} suspended or in error",
        )
        assert [type(exc) for exc in busy.raised] == [StoreUnavailable]
        assert body["status"] == "suspended", body
        assert body["generation"] == 1
