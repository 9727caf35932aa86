"""Composition root of the orchestrator: ``create_app(settings)`` wires store, bus and handlers."""

from __future__ import annotations

from faststream import FastStream
from faststream.kafka import KafkaBroker

from services.orchestrator.handlers import Orchestrator
from shared.agents import load_registry
from shared.bus import Consumer, EventPublisher, KafkaPublisher, create_broker, subscribe
from shared.events import (
    DecisionSubmitted,
    ExecutionReported,
    ExecutionRequested,
    ExecutionSuspended,
    decode_event,
)
from shared.logging import configure_logging
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore
from shared.store.ports import Store

SERVICE = "orchestrator"


class OrchestratorSettings(CommonSettings):
    pass


def register(
    broker: KafkaBroker, settings: CommonSettings, store: Store, publisher: EventPublisher
) -> Orchestrator:
    """Subscribe the orchestrator's handlers on ``broker`` (also used by the embedded mode)."""
    topics = settings.topics
    orchestrator = Orchestrator(
        store=store, publisher=publisher, topics=topics, registry=load_registry(settings.agents_file)
    )
    routes = [
        (topics.requested, "requested", lambda raw: decode_event(raw, (ExecutionRequested,)), orchestrator.on_requested),
        (topics.decisions, "decisions", lambda raw: decode_event(raw, (DecisionSubmitted,)), orchestrator.on_decision),
        (topics.suspended, "suspended", lambda raw: decode_event(raw, (ExecutionSuspended,)), orchestrator.on_suspended),
        (topics.reported, "reported", lambda raw: decode_event(raw, (ExecutionReported,)), orchestrator.on_reported),
    ]
    for topic, name, decode, handle in routes:
        consumer = Consumer(
            name=f"{SERVICE}.{name}",
            decode=decode,
            handle=handle,  # type: ignore[arg-type]
            publisher=publisher,
            dead_letter_topic=topics.dead_letters,
        )
        subscribe(broker, settings, topic=topic, service=SERVICE, consumer=consumer)
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

    return FastStream(broker, on_startup=[start], after_shutdown=[store.close])
