"""Composition root of the notifier.

Until notification channels exist (webhook, Slack, email), a suspension is announced as one
structured log line per reviewer notification, and status changes are logged.
"""

from __future__ import annotations

import structlog
from faststream import FastStream
from faststream.kafka import KafkaBroker

from shared.bus import Consumer, EventPublisher, KafkaPublisher, create_broker, subscribe
from shared.events import ExecutionStatusChanged, ExecutionSuspended, decode_event
from shared.logging import configure_logging
from shared.settings import CommonSettings

SERVICE = "notifier"
log = structlog.get_logger(__name__)


class NotifierSettings(CommonSettings):
    pass


class Notifier:
    async def on_suspended(self, event: ExecutionSuspended) -> None:
        log.info(
            "review.requested",
            agent=event.agent,
            project_id=event.project_id,
            workspace_id=event.workspace_id,
            suspension_id=event.suspension_id,
            allowed_decisions=event.allowed_decisions,
            suspend_context=event.suspend_context,
        )

    async def on_status(self, event: ExecutionStatusChanged) -> None:
        log.info("execution.status", status=event.status, execution_version=event.execution_version)


def register(broker: KafkaBroker, settings: CommonSettings, publisher: EventPublisher) -> Notifier:
    notifier = Notifier()
    topics = settings.topics
    for topic, name, model, handle in (
        (topics.suspended, "suspended", ExecutionSuspended, notifier.on_suspended),
        (topics.status, "status", ExecutionStatusChanged, notifier.on_status),
    ):
        consumer = Consumer(
            name=f"{SERVICE}.{name}",
            decode=lambda raw, model=model: decode_event(raw, (model,)),  # type: ignore[misc]
            handle=handle,  # type: ignore[arg-type]
            publisher=publisher,
            dead_letter_topic=topics.dead_letters,
        )
        subscribe(broker, settings, topic=topic, service=SERVICE, consumer=consumer)
    return notifier


def create_app(settings: NotifierSettings | None = None) -> FastStream:
    settings = settings or NotifierSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    broker = create_broker(settings, SERVICE)
    register(broker, settings, KafkaPublisher(broker))
    return FastStream(broker)
