"""What one execution costs ``interlock dev`` on its SQLite files (issue 35, item 4): the
statements and commits per file and the messages the in-process bus stores, counted with
SQLite's own trace of every statement, for the benchmark's agent run to its end (invoke,
suspension, approval, completion) through the gateway on the embedded wiring.

Counted once the execution completed and the bus is stopped, so the offsets' batches are
written; what depends on timing is left out (an idle pump's look at the log once a second, the
pruning of what every group has committed, the offsets, written at most every 200 ms)."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.dev import DevSettings
from services.gateway import app as gateway_app
from services.gateway.app import create_app
from services.notifier.app import register as register_notifier
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import publish_agent_versions
from services.sandbox.app import register as register_sandbox
from shared import inprocess_bus, inprocess_pump
from shared.inprocess_bus import InProcessBus
from shared.store.api_keys import Role, create_key
from shared.store.sqlite import SqliteStore
from shared.store.sqlite.checkpoints import LoopSqliteSaver
from tests.eventually import eventually

API = "/api/v1/projects/demo"
TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(\w+)", re.IGNORECASE)
TIMING = {"bus_offsets", "bus_messages DELETE"}
"""What the counts leave out: written as time passes, not per execution (the idle pumps' look
and the pruning are put off past the test instead)."""
BUDGET = {
    "interlock.sqlite": (27, 16),
    "checkpoints.sqlite": (13, 3),
}
"""Statements and commits per execution, by file: the gateway's key, execution and claim, the
orchestrator's six versions, the sandbox's attempts, steps and progress; LangGraph's reads of
the thread (three per run) and its write when a run ends, with the interrupt's pending write."""
MESSAGES_STORED = 14


class Trace:
    """Every statement run on the files opened while it is installed, with the transactions
    that committed: an explicit ``COMMIT``, or a write in autocommit mode."""

    def __init__(self) -> None:
        self.statements: Counter[tuple[str, str, str]] = Counter()
        """By (file, table, verb)."""
        self.commits: Counter[str] = Counter()
        self.counting = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        connect = sqlite3.connect

        def traced(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            opened: sqlite3.Connection = connect(path, *args, **kwargs)
            opened.set_trace_callback(self._on(Path(str(path)).name))
            return opened

        # Every connection of the process (the store's, the bus's, the checkpoints'), opened by
        # shared/store/sqlite/connection.py, is opened after this.
        monkeypatch.setattr(sqlite3, "connect", traced)

    def _on(self, name: str) -> Callable[[str], None]:
        in_transaction = False
        counted_writes = 0
        """Of the transaction open: the writes counted (a transaction of timed writes only,
        the offsets', is left out with them)."""

        def seen(sql: str) -> None:
            nonlocal in_transaction, counted_writes
            verb = sql.split(None, 1)[0].upper()
            if verb in ("BEGIN", "COMMIT", "ROLLBACK"):
                if verb == "COMMIT" and counted_writes:
                    self.commits[name] += 1
                in_transaction, counted_writes = verb == "BEGIN", 0
                return
            table = TABLE.search(sql)
            what = table.group(1) if table else ""
            timed = what in TIMING or f"{what} {verb}" in TIMING
            if not self.counting or verb == "PRAGMA" or timed or sql.startswith(LAG):
                return
            self.statements[(name, what, verb)] += 1
            if verb in ("INSERT", "UPDATE", "DELETE"):
                if in_transaction:
                    counted_writes += 1
                else:
                    self.commits[name] += 1

        return seen

    def of(self, name: str) -> dict[str, int]:
        return {
            f"{table} {verb}": n
            for (file, table, verb), n in self.statements.items()
            if file == name
        }


@asynccontextmanager
async def dev_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: Trace
) -> AsyncIterator[tuple[httpx.AsyncClient, InProcessBus]]:
    """``interlock dev``'s embedded wiring (interlock/dev.py), traced, with the four services'
    handlers and the gateway app."""
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    monkeypatch.setattr(inprocess_pump, "IDLE_WAKE_SECONDS", 3600.0)
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_SECONDS", 3600.0)
    monkeypatch.setattr(inprocess_bus, "PRUNE_EVERY_COMMITS", 1_000_000)
    trace.install(monkeypatch)
    settings = DevSettings(data_dir=tmp_path, kafka_bootstrap_servers="unused:9092")
    async with AsyncExitStack() as stack:
        store = await SqliteStore.open(tmp_path / "interlock.sqlite")
        stack.push_async_callback(store.close)
        checkpointer = await stack.enter_async_context(
            LoopSqliteSaver.open(tmp_path / "checkpoints.sqlite")
        )
        bus = InProcessBus(tmp_path / "bus.sqlite")
        register_orchestrator(
            bus, settings, store, bus, erase_checkpoints=saver_eraser(checkpointer)
        )
        _, graphs = register_sandbox(bus, settings, store, bus, checkpointer)
        register_notifier(bus, settings, bus, store)
        await publish_agent_versions(graphs, store)
        _, key = await create_key(store.api_keys, project_id="demo", role=Role.OWNER, name="t")
        app = create_app(settings, store=store, publisher=bus, listeners=bus)
        await bus.start()
        stack.push_async_callback(bus.stop)
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://gateway",
                headers={"Authorization": f"Bearer {key}"},
            )
        )
        yield http, bus


LAG = "SELECT COUNT(*) FROM bus_messages"
"""The test's own look at the bus (``InProcessBus.lag``)."""
UNTRACED = sqlite3.connect
"""For the test's own look at the store (installing the trace replaces ``sqlite3.connect``)."""


async def run_one(http: httpx.AsyncClient, store_file: Path, bus: InProcessBus) -> None:
    """One execution to its end, and until every consumer is done with its messages (nothing of
    it runs after: the orchestrator announces the end once the completion is stored)."""
    invoked = await http.post(
        f"{API}/workspaces/default/invoke", json={"agent": "bench-pipeline", "message": "bench"}
    )
    assert invoked.status_code == 202, invoked.text
    execution_id = invoked.json()["execution_id"]

    async def status() -> str:
        # Read aside, not through the gateway: polls would count as the execution's statements.
        with contextlib.closing(UNTRACED(store_file)) as db:
            row = db.execute(
                "SELECT status FROM executions WHERE execution_id = ?", (execution_id,)
            ).fetchone()
        return str(row[0]) if row else ""

    await eventually(status, lambda s: s == "suspended", what="suspended")
    resumed = await http.post(
        f"{API}/executions/{execution_id}/resume",
        params={"workspace_id": "default"},
        json={"decision": "approve"},
    )
    assert resumed.status_code == 202, resumed.text
    await eventually(status, lambda s: s == "completed", what="completed")
    await eventually(bus.lag, lambda n: n == 0, what="every message handled and committed")


async def test_one_execution_stays_within_its_statements_and_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = Trace()
    async with dev_mode(tmp_path, monkeypatch, trace) as (http, bus):
        await run_one(http, tmp_path / "interlock.sqlite", bus)  # pays what is loaded once
        trace.counting = True
        await run_one(http, tmp_path / "interlock.sqlite", bus)
    # A pump takes what is published as it is stored: it never reads it back.
    assert trace.of("bus.sqlite") == {"bus_messages INSERT": MESSAGES_STORED}
    # A handler's follow-ups are stored together: fewer commits than messages.
    assert trace.commits["bus.sqlite"] <= MESSAGES_STORED - 2
    for name, (statements, commits) in BUDGET.items():
        counted = trace.of(name)
        assert sum(counted.values()) <= statements, (name, counted)
        assert trace.commits[name] <= commits, (name, counted)
