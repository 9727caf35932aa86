"""Composition root of the notifier.

A suspension becomes one delivery per configured channel that wants it (``channels`` in the
notifications file, see shared/notifications/config.py), stored by the Kafka handler and sent
by the dispatcher loop (services/notifier/delivery.py). Without channels a suspension is one
structured log line. Status changes are logged.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import structlog
from faststream import FastStream
from pydantic import Field, SecretStr

from services.notifier.channels import Channel
from services.notifier.channels.run_webhook import RUN_WEBHOOK_CHANNEL, RunWebhookChannel
from services.notifier.delivery import Clock, Dispatcher
from services.notifier.wiring import build_channels
from shared import tracing
from shared.agents import AgentRegistry, load_registry
from shared.bus import ConsumerHost, EventPublisher, route
from shared.consumer_app import consumer_app
from shared.events import (
    ExecutionSuspended,
    ReviewDeadlineReached,
    RunWebhookDue,
    utc_now,
)
from shared.kafka_bus import KafkaBus
from shared.logging import configure_logging
from shared.notifications.action_links import LinkMinter
from shared.notifications.config import ChannelConfig, ChannelError, load_channels
from shared.notifications.model import Delivery, Notification
from shared.notifications.policy import notification_for, run_webhook_delivery
from shared.settings import CommonSettings
from shared.store.factory import mongo_store
from shared.store.notifications import NotificationStore
from shared.store.ports import Store
from shared.tracing import configure_tracing

SERVICE = "notifier"
log = structlog.get_logger(__name__)


class NotifierSettings(CommonSettings):
    notifications_file: Path | None = None
    """The channels (TOML); none: suspensions are only logged."""
    public_url: str = "http://127.0.0.1:8000"
    """Where reviewers reach the gateway: review links point at its /reviews page."""
    consumer_concurrency: int = Field(default=16, ge=1, le=10_000)
    """Events handled at once per subscription (each of a different execution)."""
    notification_max_attempts: int = Field(default=8, ge=1, le=100)
    notification_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    run_webhook_secrets: SecretStr | None = None
    """Comma-separated ``whsec_`` secrets that sign runs' webhooks (two while rotating); none:
    they are sent unsigned, which only a development setup should do."""
    action_link_secret: SecretStr | None = None
    """Signs the approve / reject links of channels with ``action_links = true``; the gateway
    needs the same value to accept them."""


class Notifier:
    def __init__(
        self,
        settings: NotifierSettings,
        store: NotificationStore | None,
        channels: Mapping[str, Channel],
        configs: Mapping[str, ChannelConfig],
        clock: Clock = utc_now,
        registry: AgentRegistry | None = None,
    ) -> None:
        self._clock = clock
        self._registry = registry
        self._settings = settings
        self._store = store
        self._channels = channels
        self._configs = configs

    def _wanting(self, project_id: str, agent: str) -> list[str]:
        return [name for name, c in self._configs.items() if c.wants(project_id, agent)]

    async def on_run_webhook(self, event: RunWebhookDue) -> None:
        """One delivery per run to the URL its request gave (a repeat of the event finds it
        stored: the orchestrator publishes it again with later outcomes)."""
        log.info("run.webhook_due", run_id=event.payload.get("run_id"), epoch=event.epoch)
        if self._store is None:
            return
        delivery = run_webhook_delivery(event, self._settings.public_url, self._clock())
        await self._store.enqueue(delivery)

    async def on_deadline(self, event: ReviewDeadlineReached) -> None:
        """A reminder to the channels told of the suspension; an escalation to the agent's
        ``escalate_to`` channels (those channels when it names none)."""
        wanted = self._wanting(event.project_id, event.agent)
        if event.kind == "escalate" and event.escalate_to:
            wanted = [name for name in event.escalate_to if name in self._configs]
        log.info("review.deadline", kind=event.kind, channels=wanted)
        await self._enqueue(event, wanted)

    async def on_suspended(self, event: ExecutionSuspended) -> None:
        wanted = self._wanting(event.project_id, event.agent)
        log.info(
            "review.requested",
            agent=event.agent,
            project_id=event.project_id,
            workspace_id=event.workspace_id,
            suspension_id=event.suspension_id,
            allowed_decisions=event.allowed_decisions,
            suspend_context=event.suspend_context,
            channels=wanted,
        )
        await self._enqueue(event, wanted)

    async def _enqueue(
        self, event: ExecutionSuspended | ReviewDeadlineReached, channels: list[str]
    ) -> None:
        if self._store is None:
            return
        now = self._clock()
        for channel in channels:
            notification = notification_for(event, channel, self._settings.public_url)
            if isinstance(event, ExecutionSuspended) and notification.deadline is None:
                notification = notification.model_copy(update={"deadline": self._expiry(event)})
            notification = self._with_link_decisions(notification, event, channel)
            delivery = Delivery(
                delivery_id=notification.notification_id,
                project_id=event.project_id,
                channel=channel,
                notification=notification,
                next_attempt_at=now,
                trace_context=tracing.current_carrier(),
            )
            # Insert-if-absent: a redelivered event finds its deliveries stored already.
            await self._store.enqueue(delivery)

    def _expiry(self, event: ExecutionSuspended) -> datetime | None:
        """When the suspension expires, from the agent's rules (the orchestrator stores the
        authoritative time a moment later, from its own clock)."""
        spec = self._registry.get(event.agent) if self._registry else None
        if spec is None:
            return None
        return spec.deadlines.deadlines_from(event.suspended_at).expire_at

    def _with_link_decisions(
        self,
        notification: Notification,
        event: ExecutionSuspended | ReviewDeadlineReached,
        channel: str,
    ) -> Notification:
        """Name the decisions the channel's links may take (the links themselves are minted per
        recipient when sending, and never stored)."""
        config = self._configs.get(channel)
        wants_links = bool(getattr(config, "action_links", False))
        # One decision per link: a review of several tool calls needs the page.
        if not wants_links or self._settings.action_link_secret is None:
            return notification
        decisions = notification.allowed_decisions or []
        spec = self._registry.get(event.agent) if self._registry else None
        if spec is not None and not spec.review.link_approvals:
            # The agent takes approvals from API keys only: a link may only reject.
            decisions = [d for d in decisions if d.strip().casefold() == "reject"]
        return notification.model_copy(update={"link_decisions": decisions})


def register(
    bus: ConsumerHost,
    settings: NotifierSettings,
    publisher: EventPublisher,
    store: Store | None = None,
) -> Dispatcher | None:
    """Wire the notifier's handlers on ``bus``; returns the dispatcher to run (None without
    a store: suspensions are then only logged)."""
    configs = load_channels(settings.notifications_file)
    linking = [n for n, c in configs.items() if getattr(c, "action_links", False)]
    if linking and settings.action_link_secret is None:
        raise ChannelError(
            f"channels {', '.join(linking)} ask for action links:"
            " set INTERLOCK_ACTION_LINK_SECRET (the gateway needs the same value)"
        )
    secret = settings.action_link_secret
    minter = (
        LinkMinter(secret=secret.get_secret_value(), base_url=settings.public_url)
        if secret is not None
        else None
    )
    if RUN_WEBHOOK_CHANNEL in configs:
        raise ChannelError(f"the channel name {RUN_WEBHOOK_CHANNEL!r} is Interlock's own")
    channels = build_channels(configs, os.environ, links=minter)
    run_secrets = settings.run_webhook_secrets
    channels[RUN_WEBHOOK_CHANNEL] = RunWebhookChannel(
        [s.strip() for s in run_secrets.get_secret_value().split(",") if s.strip()]
        if run_secrets is not None
        else [],
        allow_private=settings.webhook_allow_private_networks,
    )
    notifications = store.notifications if store is not None else None
    registry = load_registry(settings.agents_file)
    notifier = Notifier(settings, notifications, channels, configs, registry=registry)
    topics = settings.topics
    route(
        bus,
        settings,
        publisher,
        service=SERVICE,
        topic=topics.suspended,
        model=ExecutionSuspended,
        handle=notifier.on_suspended,
    )
    route(
        bus,
        settings,
        publisher,
        service=SERVICE,
        topic=topics.deadlines,
        model=ReviewDeadlineReached,
        handle=notifier.on_deadline,
    )
    route(
        bus,
        settings,
        publisher,
        service=SERVICE,
        topic=topics.run_webhooks,
        model=RunWebhookDue,
        handle=notifier.on_run_webhook,
    )
    # Not execution.status: the notifier once consumed every status change only to log it, six
    # messages per execution that cost it more CPU than its real work. Each change is in the
    # execution's audit trail and the orchestrator's transitions counter.
    if notifications is None:
        return None
    return Dispatcher(
        notifications,
        channels,
        clock=utc_now,
        owner=f"{socket.gethostname()}:{os.getpid()}",
        max_attempts=settings.notification_max_attempts,
    )


def create_app(settings: NotifierSettings | None = None) -> FastStream:
    settings = settings or NotifierSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    bus = KafkaBus(settings, SERVICE)
    store = mongo_store(settings)
    dispatcher = register(bus, settings, bus.publisher, store)
    assert dispatcher is not None
    return consumer_app(
        SERVICE,
        settings,
        bus,
        store,
        loops=(lambda: dispatcher.run_forever(settings.notification_poll_seconds),),
    )
