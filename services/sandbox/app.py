"""Composition root of the sandbox: agents, LangGraph checkpointer, step cache, store and bus."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Self

import structlog
from faststream import FastStream
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import Field, model_validator

from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.handlers import Sandbox
from services.sandbox.mongo_checkpoints import AsyncMongoSaver
from services.sandbox.runner import AgentRunner, GraphCache
from shared.agents import load_registry
from shared.background import background_hooks
from shared.bus import Bus, EventPublisher, KafkaPublisher, create_broker, route
from shared.consumer_lag import consumer_lag_of
from shared.errors import RetryableError
from shared.events import ExecutionDispatched
from shared.health import health_hooks
from shared.logging import announce_started, configure_logging
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore
from shared.store.ports import Store
from shared.tracing import configure_tracing

SERVICE = "sandbox"
log = structlog.get_logger(__name__)


class SandboxSettings(CommonSettings):
    run_timeout_seconds: float = Field(default=1_800, gt=0)
    """Longest one agent run (start to suspension or end) may take; a longer one fails."""
    max_poll_interval_ms: int = Field(default=3_600_000, ge=10_000)
    """Kafka hands the partition to another replica if one message takes longer than this;
    it must exceed the run timeout (checked at start-up)."""
    consumer_concurrency: int = Field(default=16, ge=1, le=10_000)
    """Agent runs this replica has in flight at once (each of a different execution): most of a
    run is spent waiting on models and tools, so one process keeps many going."""
    max_checkpoint_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_step_result_bytes: int = Field(default=1024 * 1024, ge=64)

    @model_validator(mode="after")
    def _run_fits_poll_interval(self) -> Self:
        if self.run_timeout_seconds * 1000 >= self.max_poll_interval_ms:
            raise ValueError(
                "run_timeout_seconds must be shorter than max_poll_interval_ms, or a long run"
                " would be handed to a second replica while the first still runs it"
            )
        return self


def build_sandbox(
    settings: SandboxSettings,
    store: Store,
    publisher: EventPublisher,
    checkpointer: BaseCheckpointSaver[Any],
) -> tuple[Sandbox, GraphCache]:
    graphs = GraphCache(
        load_registry(settings.agents_file),
        GuardedSaver(checkpointer, max_checkpoint_bytes=settings.max_checkpoint_bytes),
    )
    runner = AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=settings.run_timeout_seconds,
        max_step_result_bytes=settings.max_step_result_bytes,
        progress=store.progress,
    )
    sandbox = Sandbox(
        store=store,
        publisher=publisher,
        topics=settings.topics,
        runner=runner,
        keyring=settings.keyring,
    )
    return sandbox, graphs


async def publish_agent_versions(graphs: GraphCache, store: Store) -> None:
    """Load every agent now (a broken one fails the start, not the first execution) and tell
    the gateway and the orchestrator which versions run here."""
    for loaded in graphs.load_all():
        await store.agent_versions.publish(loaded.version)
        log.info("agent.loaded", agent=loaded.spec.name, fingerprint=loaded.fingerprint)


def register(
    broker: Bus,
    settings: SandboxSettings,
    store: Store,
    publisher: EventPublisher,
    checkpointer: BaseCheckpointSaver[Any],
) -> tuple[Sandbox, GraphCache]:
    """Wire a sandbox on ``broker`` (``interlock dev`` and in-process tests use this); publish
    its agent versions with ``publish_agent_versions`` once the store is open."""
    sandbox, graphs = build_sandbox(settings, store, publisher, checkpointer)
    _subscribe(broker, settings, publisher, sandbox.on_dispatched)
    return sandbox, graphs


class _LateSandbox:
    """The handler exists from wiring time; the sandbox behind it is built at start-up, when the
    checkpointer has connected."""

    def __init__(self) -> None:
        self.sandbox: Sandbox | None = None

    async def on_dispatched(self, command: ExecutionDispatched) -> None:
        if self.sandbox is None:
            raise RetryableError("sandbox is still starting")
        await self.sandbox.on_dispatched(command)


def _subscribe(
    broker: Bus,
    settings: SandboxSettings,
    publisher: EventPublisher,
    handle: Callable[[ExecutionDispatched], Awaitable[None]],
) -> None:
    route(
        broker,
        settings,
        publisher,
        service=SERVICE,
        topic=settings.topics.dispatched,
        model=ExecutionDispatched,
        handle=handle,
        max_poll_interval_ms=settings.max_poll_interval_ms,
    )


def create_app(settings: SandboxSettings | None = None) -> FastStream:
    settings = settings or SandboxSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    broker = create_broker(settings, SERVICE)
    publisher = KafkaPublisher(broker)
    store = MongoStore.connect(
        settings.mongodb_uri,
        settings.mongodb_database,
        operation_timeout_ms=settings.mongodb_timeout_ms,
        slow_command_ms=settings.mongodb_slow_command_ms,
    )
    late = _LateSandbox()
    _subscribe(broker, settings, publisher, late.on_dispatched)

    async def start() -> None:
        await store.ping()
        await store.ensure_indexes()
        # On the store's own client: one pool, the same timeouts and command timing.
        checkpointer = AsyncMongoSaver(store.database)
        sandbox, graphs = build_sandbox(settings, store, publisher, checkpointer)
        await publish_agent_versions(graphs, store)
        late.sandbox = sandbox

    async def stop() -> None:
        await store.close()

    lag = consumer_lag_of(broker, settings)
    start_loops, stop_loops = background_hooks(
        lambda: lag.run_forever(settings.metrics_poll_seconds)
    )
    health_start, health_stop = health_hooks(settings, broker.ping, store.ping)
    return FastStream(
        broker,
        on_startup=[*health_start, start],
        after_startup=[start_loops, announce_started(SERVICE)],
        on_shutdown=[stop_loops],
        after_shutdown=[stop, *health_stop],
    )
