"""Composition root of the sandbox: agents, LangGraph checkpointer, store and bus."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from faststream import FastStream
from faststream.kafka import KafkaBroker
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.mongodb import MongoDBSaver
from pydantic import Field
from pymongo import MongoClient

from services.sandbox.handlers import Sandbox
from services.sandbox.runner import AgentRunner, GraphCache
from shared.agents import load_registry
from shared.bus import EventPublisher, KafkaPublisher, create_broker, route
from shared.errors import RetryableError
from shared.events import ExecutionDispatched
from shared.logging import announce_started, configure_logging
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore
from shared.store.ports import Store

SERVICE = "sandbox"


class SandboxSettings(CommonSettings):
    max_poll_interval_ms: int = Field(default=300_000, ge=10_000)
    """How long one agent run may hold its partition before Kafka hands it to another replica."""


class _LateSandbox:
    """The handler exists from wiring time; the sandbox behind it is built at start-up, when the
    checkpointer has connected."""

    def __init__(self) -> None:
        self.sandbox: Sandbox | None = None

    async def on_dispatched(self, command: ExecutionDispatched) -> None:
        if self.sandbox is None:
            raise RetryableError("sandbox is still starting")
        await self.sandbox.on_dispatched(command)


def register(
    broker: KafkaBroker,
    settings: SandboxSettings,
    store: Store,
    publisher: EventPublisher,
    checkpointer: BaseCheckpointSaver[Any],
) -> Sandbox:
    sandbox = Sandbox(
        store=store,
        publisher=publisher,
        topics=settings.topics,
        runner=AgentRunner(GraphCache(load_registry(settings.agents_file), checkpointer)),
    )
    _subscribe(broker, settings, publisher, sandbox.on_dispatched)
    return sandbox


def _subscribe(
    broker: KafkaBroker,
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
    broker = create_broker(settings, SERVICE)
    publisher = KafkaPublisher(broker)
    store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_database)
    late = _LateSandbox()
    _subscribe(broker, settings, publisher, late.on_dispatched)
    sync_client: MongoClient[Any] | None = None

    async def start() -> None:
        nonlocal sync_client
        await store.ping()
        await store.ensure_indexes()
        # langgraph-checkpoint-mongodb only has a synchronous saver (its async methods run the
        # sync calls in a thread pool); its constructor creates indexes, so it is built here.
        sync_client = MongoClient(
            settings.mongodb_uri, serverSelectionTimeoutMS=5_000, tz_aware=True
        )
        checkpointer = await asyncio.to_thread(
            MongoDBSaver, sync_client, db_name=settings.mongodb_database
        )
        registry = load_registry(settings.agents_file)
        late.sandbox = Sandbox(
            store=store,
            publisher=publisher,
            topics=settings.topics,
            runner=AgentRunner(GraphCache(registry, checkpointer)),
        )

    async def stop() -> None:
        await store.close()
        if sync_client is not None:
            sync_client.close()

    return FastStream(
        broker,
        on_startup=[start],
        after_startup=[announce_started(SERVICE)],
        after_shutdown=[stop],
    )
