"""Composition root of the sandbox: agents, LangGraph checkpointer, step cache, store and bus."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog
from faststream import FastStream
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import Field

from services.sandbox.agent_memory import AgentMemory
from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.description import describe
from services.sandbox.handlers import Sandbox
from services.sandbox.loading import GraphCache
from services.sandbox.mongo_checkpoints import AsyncMongoSaver
from services.sandbox.progress import ProgressAnnouncer
from services.sandbox.runner import AgentRunner
from shared import metrics
from shared.agents import load_registry
from shared.bus import ConsumerHost, EventPublisher, route
from shared.consumer_app import consumer_app
from shared.errors import RetryableError
from shared.events import ExecutionDispatched
from shared.kafka_bus import KafkaBus
from shared.logging import configure_logging
from shared.settings import CommonSettings
from shared.store.factory import mongo_store
from shared.store.ports import Store
from shared.tracing import configure_tracing

SERVICE = "sandbox"
log = structlog.get_logger(__name__)


class SandboxSettings(CommonSettings):
    run_timeout_seconds: float = Field(default=1_800, gt=0)
    """Longest one agent run (start to suspension or end) may take; a longer one fails."""
    consumer_concurrency: int = Field(default=32, ge=1, le=10_000)
    """Agent runs this replica has in flight at once (each of a different execution): most of a
    run is spent waiting on models and tools, so one process keeps many going."""
    max_checkpoint_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_step_result_bytes: int = Field(default=1024 * 1024, ge=64)


def build_sandbox(
    settings: SandboxSettings,
    store: Store,
    publisher: EventPublisher,
    checkpointer: BaseCheckpointSaver[Any],
) -> tuple[Sandbox, GraphCache]:
    graphs = GraphCache(
        load_registry(settings.agents_file),
        GuardedSaver(checkpointer, max_checkpoint_bytes=settings.max_checkpoint_bytes),
        AgentMemory(store.memories),
    )
    runner = AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=settings.run_timeout_seconds,
        max_step_result_bytes=settings.max_step_result_bytes,
        progress=store.progress,
        announcer=ProgressAnnouncer(publisher, settings.topics.activity),
    )
    sandbox = Sandbox(
        store=store,
        publisher=publisher,
        topics=settings.topics,
        runner=runner,
        keyring=settings.keyring,
    )
    return sandbox, graphs


def size_thread_pool(settings: SandboxSettings) -> None:
    """Give the running loop a default executor with a thread per run in flight. LangGraph runs
    an agent's synchronous nodes and tools in it, and asyncio's default (``min(32, cores + 4)``
    threads: 6 on two cores) would cap the runs doing synchronous I/O at once well below
    ``consumer_concurrency``."""
    workers = max(settings.consumer_concurrency, 8)
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-run")
    )


async def publish_agent_versions(graphs: GraphCache, store: Store) -> None:
    """Load every agent now and tell the gateway and the orchestrator which versions run here,
    each with how its graph looks (LangGraph's assistants routes). One that cannot be loaded is
    reported (logged, ``interlock_agents_unloadable``, the readiness probe, and in the store for
    the agents routes) and its new executions fail with the reason, its suspensions wait; the
    others serve."""
    for loaded in graphs.load_all():
        await store.agent_versions.publish(loaded.version, describe(loaded.graph, loaded.spec.name))
        metrics.AGENTS_UNLOADABLE.labels(loaded.spec.name).set(0)
        log.info("agent.loaded", agent=loaded.spec.name, fingerprint=loaded.fingerprint)
    for agent, reason in graphs.unloadable.items():
        await store.agent_versions.report_unloadable(agent, reason)
        metrics.AGENTS_UNLOADABLE.labels(agent).set(1)
        log.error("agent.unloadable", agent=agent, reason=reason)


def readiness_details(graphs: GraphCache | None) -> dict[str, object]:
    """The agents this sandbox cannot load, for its readiness probe: it stays ready (the others
    serve), and says which fail and why."""
    if graphs is None or not graphs.unloadable:
        return {}
    return {"agents_unloadable": dict(graphs.unloadable)}


def register(
    bus: ConsumerHost,
    settings: SandboxSettings,
    store: Store,
    publisher: EventPublisher,
    checkpointer: BaseCheckpointSaver[Any],
) -> tuple[Sandbox, GraphCache]:
    """Wire a sandbox on ``bus`` (``interlock dev`` and in-process tests use this); publish
    its agent versions with ``publish_agent_versions`` once the store is open."""
    sandbox, graphs = build_sandbox(settings, store, publisher, checkpointer)
    _subscribe(bus, settings, publisher, sandbox.on_dispatched)
    return sandbox, graphs


class _LateSandbox:
    """The handler exists from wiring time; the sandbox behind it is built at start-up, when the
    checkpointer has connected."""

    def __init__(self) -> None:
        self.sandbox: Sandbox | None = None
        self.graphs: GraphCache | None = None

    async def on_dispatched(self, command: ExecutionDispatched) -> None:
        if self.sandbox is None:
            raise RetryableError("sandbox is still starting")
        await self.sandbox.on_dispatched(command)


def _subscribe(
    bus: ConsumerHost,
    settings: SandboxSettings,
    publisher: EventPublisher,
    handle: Callable[[ExecutionDispatched], Awaitable[None]],
) -> None:
    route(
        bus,
        settings,
        publisher,
        service=SERVICE,
        topic=settings.topics.dispatched,
        model=ExecutionDispatched,
        handle=handle,
    )


def create_app(settings: SandboxSettings | None = None) -> FastStream:
    settings = settings or SandboxSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    bus = KafkaBus(settings, SERVICE)
    publisher = bus.publisher
    store = mongo_store(settings)
    late = _LateSandbox()
    _subscribe(bus, settings, publisher, late.on_dispatched)

    async def start() -> None:
        size_thread_pool(settings)
        # On the store's own client: one pool, the same timeouts and command timing.
        checkpointer = AsyncMongoSaver(store.database, compress=store.compress_state)
        sandbox, graphs = build_sandbox(settings, store, publisher, checkpointer)
        late.graphs = graphs
        await publish_agent_versions(graphs, store)
        late.sandbox = sandbox

    return consumer_app(
        SERVICE,
        settings,
        bus,
        store,
        start=start,
        ready_details=lambda: readiness_details(late.graphs),
    )
