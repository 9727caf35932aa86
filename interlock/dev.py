"""``interlock dev``: the four services in one process, for trying Interlock with only Python.

The same handlers, schemas and validation as the distributed mode; only two adapters differ:
the bus is the in-process one (``shared/inprocess_bus.py``, SQLite-backed) and the store and the
LangGraph checkpointer are SQLite files under the data folder, so a suspended execution can be
approved after a restart. Given Kafka and MongoDB settings it runs the same single process
against them instead (the distributed mode's adapters, unchanged).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import uvicorn
from langgraph.checkpoint.base import BaseCheckpointSaver

from interlock.announcement import announcement
from interlock.effects_sink import EffectsLedger, effects_router
from interlock.profile import RunningProfile, dev_instance
from services.gateway.app import GatewaySettings, create_app
from services.notifier.app import NotifierSettings
from services.notifier.app import register as register_notifier
from services.orchestrator.app import (
    OrchestratorSettings,
    abandoned_requests,
    cron_sweeper,
    thread_retention,
)
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.gauges import ExecutionGauges
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import SandboxSettings, publish_agent_versions, size_thread_pool
from services.sandbox.app import register as register_sandbox
from shared import metrics
from shared.bus import Bus, EventPublisher, ensure_topics
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.logging import configure_logging
from shared.senders import SenderCheck, gateway_public_keys, load_producers
from shared.store.factory import mongo_store
from shared.store.ports import Store
from shared.store.sqlite import SqliteStore
from shared.store.sqlite.checkpoints import LoopSqliteSaver
from shared.store.sqlite.database import PRIVATE_FILE, make_private
from shared.tracing import configure_tracing

DEV_API_KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"
"""The well-known owner key of project ``demo`` (the gateway refuses it outside development)."""


class DevSettings(GatewaySettings, SandboxSettings, NotifierSettings, OrchestratorSettings):
    """Every service's settings in one (``INTERLOCK_*`` as usual), plus where dev data lives."""

    data_dir: Path = Path(".interlock/dev")
    embedded: bool = True
    """SQLite and the in-process bus; False: the given Kafka and MongoDB."""
    # A terminal someone reads: readable lines, and only the ones that need them (every handled
    # event at info would push the key and URLs off the screen). INTERLOCK_LOG_LEVEL=info or
    # --log-format json bring back the services' full logs.
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    log_format: Literal["auto", "json", "console"] = "console"
    webhook_allow_private_networks: bool = True
    """A run's webhook may call a receiver on this machine: development listens on loopback
    only, and a receiver here is what developing against it means."""

    @functools.cached_property
    def sender_check(self) -> SenderCheck:
        """One process signs and verifies: a signing key set without verify keys is trusted by
        its public half (the services' own settings need both)."""
        verify = self.decision_verify_keys
        if verify is None and self.decision_signing_key is not None:
            verify = self.decision_signer.verify_setting()
        return SenderCheck(
            gateway_public_keys(verify, environment=self.environment),
            load_producers(self.decision_producers_file),
        )

    @property
    def hosts_effects_sink(self) -> bool:
        """The sink takes writes without a key: only where nothing is real."""
        return self.environment == "development"

    @property
    def loopback_url(self) -> str:
        """Where this process reaches its own gateway (a wildcard address is not one)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"


LOG_HINT = "Logging warnings only (INTERLOCK_LOG_LEVEL=info shows every event)."


PRIVATE_FOLDER = 0o700


def private_data_dir(path: Path) -> Path:
    """The data folder, readable by its owner only: created 0700 (with its missing parents), or
    taken down to 0700 with every file in it 0600 when an older version made them 0755 and 0644.
    It holds executions, audit trails, key hashes, checkpoints and the bus's messages; SQLite
    would make each file 0644, so each opener gets a file ``make_private`` made first."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=PRIVATE_FOLDER)
    path.chmod(PRIVATE_FOLDER)
    for entry in path.iterdir():
        if entry.is_file() and not entry.is_symlink():
            entry.chmod(PRIVATE_FILE)
    return path


@dataclass
class Wiring:
    bus: Bus
    publisher: EventPublisher
    store: Store
    checkpointer: BaseCheckpointSaver[Any]


@asynccontextmanager
async def embedded(settings: DevSettings) -> AsyncIterator[Wiring]:
    data = private_data_dir(settings.data_dir)
    async with AsyncExitStack() as stack:
        store = await SqliteStore.open(data / "interlock.sqlite")
        stack.push_async_callback(store.close)
        # LangGraph's SQLite tables, on the loop's thread (shared/store/sqlite/checkpoints.py).
        checkpointer = await stack.enter_async_context(
            LoopSqliteSaver.open(data / "checkpoints.sqlite")
        )
        make_private(data / "bus.sqlite")
        # Offsets written as often as the Kafka consumers commit theirs.
        commit_interval = settings.consumer_commit_interval_ms / 1000
        bus = InProcessBus(data / "bus.sqlite", commit_interval_seconds=commit_interval)
        yield Wiring(bus=bus, publisher=bus, store=store, checkpointer=checkpointer)


@asynccontextmanager
async def on_infrastructure(settings: DevSettings) -> AsyncIterator[Wiring]:
    from services.sandbox.mongo_checkpoints import AsyncMongoSaver

    await ensure_topics(settings)
    store = mongo_store(settings)
    try:
        bus = KafkaBus(settings, "interlock-dev")
        yield Wiring(
            bus=bus,
            publisher=bus.publisher,
            store=store,
            checkpointer=AsyncMongoSaver(store.database, compress=store.compress_state),
        )
    finally:
        await store.close()


async def serve(settings: DevSettings) -> None:
    configure_logging("interlock-dev", level=settings.log_level, fmt=settings.log_format)
    configure_tracing("dev")
    wiring_of = embedded if settings.embedded else on_infrastructure
    size_thread_pool(settings)
    async with wiring_of(settings) as wiring:
        await wiring.store.ensure_indexes()
        erase_checkpoints = saver_eraser(wiring.checkpointer)
        orchestrator, sweeper = register_orchestrator(
            wiring.bus,
            settings,
            wiring.store,
            wiring.publisher,
            erase_checkpoints=erase_checkpoints,
        )
        retention = thread_retention(settings, wiring.store, erase_checkpoints)
        abandoned = abandoned_requests(orchestrator, settings, wiring.store)
        crons = cron_sweeper(orchestrator, settings, wiring.store)
        _, graphs = register_sandbox(
            wiring.bus, settings, wiring.store, wiring.publisher, wiring.checkpointer
        )
        dispatcher = register_notifier(wiring.bus, settings, wiring.publisher, wiring.store)
        await publish_agent_versions(graphs, wiring.store)
        app = create_app(
            settings,
            store=wiring.store,
            publisher=wiring.publisher,
            listeners=wiring.bus,
            metrics_of=metrics.SERVICES,  # the four services run here
        )
        if settings.hosts_effects_sink:
            make_private(private_data_dir(settings.data_dir) / "effects.sqlite")
            ledger = EffectsLedger(settings.data_dir / "effects.sqlite")
            app.include_router(effects_router(ledger))
            # Read by the agents (outreach) at each call: set before any of them runs.
            os.environ.setdefault("INTERLOCK_EFFECTS_URL", f"{settings.loopback_url}/dev")
        base_url = f"http://{settings.host}:{settings.port}"
        quiet = settings.log_level in ("warning", "error") and settings.log_format != "json"
        running = RunningProfile(dev_instance(settings))  # the CLI's way to this instance
        server = AnnouncingServer(
            # The app, not uvicorn, decides whose X-Forwarded-For to trust (trusted_proxies).
            uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_config=None,
                proxy_headers=False,
            ),
            announcement=announcement(
                base_url,
                settings.dev_api_key,
                effects_sink=settings.hosts_effects_sink,
                log_hint=LOG_HINT if quiet else None,
            ),
            on_started=running.write,
        )
        await wiring.bus.start()
        gauges = ExecutionGauges(wiring.store.executions)
        loops = [
            asyncio.create_task(sweeper.run_forever(settings.deadline_poll_seconds)),
            asyncio.create_task(abandoned.run_forever(settings.deadline_poll_seconds)),
            asyncio.create_task(retention.run_forever(settings.thread_retention_poll_seconds)),
            asyncio.create_task(crons.run_forever(settings.cron_poll_seconds)),
            asyncio.create_task(gauges.run_forever(settings.metrics_poll_seconds)),
        ]
        lag = wiring.bus.lag_monitor()  # on Kafka: the groups' lag is measured
        if lag is not None:
            loops.append(asyncio.create_task(lag.run_forever(settings.metrics_poll_seconds)))
        if dispatcher is not None:
            poll = settings.notification_poll_seconds
            loops.append(asyncio.create_task(dispatcher.run_forever(poll)))
        try:
            await server.serve()
        finally:
            for loop in loops:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            with contextlib.suppress(Exception):
                await wiring.bus.stop()
            running.remove()


class AnnouncingServer(uvicorn.Server):
    """Prints how to try Interlock once the port is open, not before; then ``on_started``
    (the CLI's profile is written once the server answers)."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        announcement: str,
        on_started: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(config)
        self._announcement = announcement
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self._announcement, flush=True)
            self._on_started()
