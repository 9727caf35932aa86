"""Composition root of the notifier.

Until notification channels exist (webhook, Slack, email), a suspension is announced as one
structured log line per reviewer notification, and status changes are logged.
"""

from __future__ import annotations

import structlog
from faststream import FastStream

from shared.bus import Bus, EventPublisher, KafkaPublisher, create_broker, route
from shared.events import ExecutionStatusChanged, ExecutionSuspended
from shared.logging import announce_started, configure_logging
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
        log.info("execution.status", status=event.status, sequence=event.sequence)


def register(broker: Bus, settings: CommonSettings, publisher: EventPublisher) -> Notifier:
    notifier = Notifier()
    topics = settings.topics
    route(
        broker,
        settings,
        publisher,
        service=SERVICE,
        topic=topics.suspended,
        model=ExecutionSuspended,
        handle=notifier.on_suspended,
    )
    route(
        broker,
        settings,
        publisher,
        service=SERVICE,
        topic=topics.status,
        model=ExecutionStatusChanged,
        handle=notifier.on_status,
    )
    return notifier


def create_app(settings: NotifierSettings | None = None) -> FastStream:
    settings = settings or NotifierSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    broker = create_broker(settings, SERVICE)
    register(broker, settings, KafkaPublisher(broker))
    return FastStream(broker, after_startup=[announce_started(SERVICE)])
