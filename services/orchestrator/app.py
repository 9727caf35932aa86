"""Composition root of the orchestrator: ``create_app(settings)`` wires store, bus and handlers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import FastStream

from services.orchestrator.handlers import Orchestrator
from shared.agents import load_registry
from shared.bus import Bus, E, EventPublisher, KafkaPublisher, create_broker, route
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    ExecutionReported,
    ExecutionRequested,
    ExecutionSuspended,
)
from shared.logging import announce_started, configure_logging
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore
from shared.store.ports import Store

SERVICE = "orchestrator"


class OrchestratorSettings(CommonSettings):
    pass


def register(
    broker: Bus, settings: CommonSettings, store: Store, publisher: EventPublisher
) -> Orchestrator:
    """Subscribe the orchestrator's handlers on ``broker`` (also used by the embedded mode)."""
    topics = settings.topics
    orchestrator = Orchestrator(
        store=store,
        publisher=publisher,
        topics=topics,
        registry=load_registry(settings.agents_file),
    )

    def on(topic: str, model: type[E], handle: Callable[[E], Awaitable[None]]) -> None:
        route(broker, settings, publisher, service=SERVICE, topic=topic, model=model, handle=handle)

    on(topics.requested, ExecutionRequested, orchestrator.on_requested)
    on(topics.decisions, DecisionSubmitted, orchestrator.on_decision)
    on(topics.cancellations, CancelRequested, orchestrator.on_cancel)
    on(topics.suspended, ExecutionSuspended, orchestrator.on_suspended)
    on(topics.reported, ExecutionReported, orchestrator.on_reported)
    return orchestrator


def create_app(settings: OrchestratorSettings | None = None) -> FastStream:
    settings = settings or OrchestratorSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    broker = create_broker(settings, SERVICE)
    store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_database)
    register(broker, settings, store, KafkaPublisher(broker))

    async def start() -> None:
        await store.ping()
        await store.ensure_indexes()

    return FastStream(
        broker,
        on_startup=[start],
        after_startup=[announce_started(SERVICE)],
        after_shutdown=[store.close],
    )
