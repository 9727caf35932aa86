"""Composition root of the orchestrator: ``create_app(settings)`` wires store, bus and handlers."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Self

from faststream import FastStream
from pydantic import Field, model_validator

from services.orchestrator.abandoned import AbandonedRequests
from services.orchestrator.crons import CronSweeper
from services.orchestrator.deadlines import DeadlineSweeper
from services.orchestrator.gauges import ExecutionGauges
from services.orchestrator.handlers import Orchestrator
from services.orchestrator.known import KnownExecutions
from services.orchestrator.thread_erasure import CheckpointEraser, ThreadEraser
from services.orchestrator.thread_retention import ThreadRetention
from shared.agents import load_registry
from shared.bus import ConsumerHost, E, EventPublisher, current_delivery, route
from shared.consumer_app import consumer_app
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    ExecutionReported,
    ExecutionRequested,
    ExecutionSuspended,
    ThreadDeleteRequested,
    utc_now,
)
from shared.kafka_bus import KafkaBus
from shared.logging import configure_logging
from shared.senders import Sender, SenderCheck, Unverified, gateway_public_keys, load_producers
from shared.settings import CommonSettings
from shared.store.factory import mongo_store
from shared.store.mongo.checkpoint_erasure import erase_checkpoints as erase_mongo_checkpoints
from shared.store.ports import Store
from shared.tracing import configure_tracing

SERVICE = "orchestrator"


class OrchestratorSettings(CommonSettings):
    deadline_poll_seconds: float = Field(default=5.0, gt=0, le=3600)
    """How often each replica looks for suspensions past a deadline (and for requests to
    abandon)."""
    abandon_undelivered_after_seconds: float = Field(default=600.0, gt=0)
    """How long a request the gateway could not deliver (503) waits for its client's retry
    before it ends in ``error`` (``services/orchestrator/abandoned.py``)."""
    execution_cache_size: int = Field(default=10_000, ge=0)
    """How many executions each replica keeps the last version of, so an event costs no read
    (services/orchestrator/known.py); 0 reads every execution for every event."""
    consumer_concurrency: int = Field(default=64, ge=1, le=10_000)
    """Events applied at once per subscription (each of a different execution): an event is a
    few store round trips, so many overlap."""
    decision_verify_keys: str | None = None
    """The gateways' public decision keys, comma-separated ``<key id>:<base64>`` (add a new key
    here before the gateways sign with it): a decision is applied only when the gateway or a
    registered outside producer signed it (shared/senders.py). Required in production; elsewhere
    the development key's."""
    decision_producers_file: Path | None = None
    """TOML registering outside producers that may publish decisions themselves, each with its
    public key, role and projects (docs/security.md, "The bus as a channel"). None: only the
    gateway's decisions are applied."""
    thread_delete_keeps_audit: bool = True
    """What deleting a thread leaves of its turns: with true (the default) their audit stays,
    readable through the executions API (each execution with its input, result and every
    transition, decision claims, approvals, the notification history); with false nothing of
    them stays. Checkpoints, durable steps, attempts and progress go either way."""
    thread_retention_poll_seconds: float = Field(default=60.0, gt=0, le=86_400)
    """How often each replica deletes the threads past their time to live (a thread's ``ttl``,
    or the gateway's ``INTERLOCK_THREAD_TTL_MINUTES``); one busy then is tried again a poll
    later."""
    cron_poll_seconds: float = Field(default=1.0, gt=0, le=3_600)
    """How often each replica fires the crons due (a cron's tick runs within this of its time)."""
    cron_ticks_kept_days: float = Field(default=30.0, ge=1, le=3_650)
    """How long the record of each tick fired (``cron_ticks``, what ``GET .../crons/{id}/ticks``
    lists) is kept: a tick's run keeps its own audit trail beyond it."""
    cron_catch_up_grace_seconds: float = Field(default=60.0, ge=0, le=86_400)
    """How late a tick may fire and still count as on time: a cron with ``catch_up="skip"``
    fires no tick later than this (ticks missed while no orchestrator ran)."""
    clock_file: Path | None = None
    """Tests only: a file holding an ISO 8601 time that replaces the wall clock for deadlines
    (the wall clock while it is missing). Refused in production."""

    @model_validator(mode="after")
    def _no_test_clock_in_production(self) -> Self:
        if self.clock_file is not None and self.environment == "production":
            raise ValueError("INTERLOCK_CLOCK_FILE is for tests; it is refused in production")
        self.sender_check  # noqa: B018 -- missing or malformed keys fail at start-up
        return self

    @functools.cached_property
    def sender_check(self) -> SenderCheck:
        """Who sent a decision or request: the gateways' keys and the registered producers."""
        return SenderCheck(
            gateway_public_keys(self.decision_verify_keys, environment=self.environment),
            load_producers(self.decision_producers_file),
        )


def clock_of(settings: OrchestratorSettings) -> Callable[[], datetime]:
    path = settings.clock_file
    if path is None:
        return utc_now

    def read() -> datetime:
        try:
            return datetime.fromisoformat(path.read_text().strip())
        except (OSError, ValueError):
            return utc_now()

    return read


def register(
    bus: ConsumerHost,
    settings: OrchestratorSettings,
    store: Store,
    publisher: EventPublisher,
    *,
    erase_checkpoints: CheckpointEraser,
) -> tuple[Orchestrator, DeadlineSweeper]:
    """Subscribe the orchestrator's handlers on ``bus`` (also used by the embedded mode);
    the composition root runs the returned sweeper. ``erase_checkpoints`` removes a deleted
    thread's checkpoints from wherever the sandbox stores them."""
    topics = settings.topics
    clock = clock_of(settings)
    orchestrator = Orchestrator(
        store=store,
        publisher=publisher,
        topics=topics,
        registry=load_registry(settings.agents_file),
        clock=clock,
        known=KnownExecutions(settings.execution_cache_size),
    )
    sweeper = DeadlineSweeper(
        store=store, publisher=publisher, topics=topics, orchestrator=orchestrator, clock=clock
    )

    def on(topic: str, model: type[E], handle: Callable[[E], Awaitable[None]]) -> None:
        route(bus, settings, publisher, service=SERVICE, topic=topic, model=model, handle=handle)

    check = settings.sender_check

    def sender() -> Sender:
        """Who signed the message being handled (shared/senders.py)."""
        delivery = current_delivery()
        if delivery is None:
            return Unverified("no message in hand")
        return check.sender_of(delivery.body, delivery.headers)

    async def on_requested(event: ExecutionRequested) -> None:
        await orchestrator.on_requested(event, sender())

    async def on_decision(event: DecisionSubmitted) -> None:
        await orchestrator.on_decision(event, sender())

    on(topics.requested, ExecutionRequested, on_requested)
    on(topics.decisions, DecisionSubmitted, on_decision)

    async def on_cancel(event: CancelRequested) -> None:
        await orchestrator.on_cancel(event, sender())

    on(topics.cancellations, CancelRequested, on_cancel)
    eraser = thread_eraser(settings, store, erase_checkpoints)

    async def on_thread_deleted(event: ThreadDeleteRequested) -> None:
        await eraser.on_delete_requested(event, sender())

    on(topics.thread_deletions, ThreadDeleteRequested, on_thread_deleted)
    on(topics.suspended, ExecutionSuspended, orchestrator.on_suspended)
    on(topics.reported, ExecutionReported, orchestrator.on_reported)
    return orchestrator, sweeper


def thread_eraser(
    settings: OrchestratorSettings, store: Store, erase_checkpoints: CheckpointEraser
) -> ThreadEraser:
    return ThreadEraser(
        store=store,
        checkpoints=erase_checkpoints,
        keep_audit=settings.thread_delete_keeps_audit,
    )


def thread_retention(
    settings: OrchestratorSettings, store: Store, erase_checkpoints: CheckpointEraser
) -> ThreadRetention:
    """The sweep that deletes expired threads (services/orchestrator/thread_retention.py)."""
    return ThreadRetention(
        store=store,
        eraser=thread_eraser(settings, store, erase_checkpoints),
        clock=clock_of(settings),
        retry_after=timedelta(seconds=settings.thread_retention_poll_seconds),
    )


def cron_sweeper(
    orchestrator: Orchestrator, settings: OrchestratorSettings, store: Store
) -> CronSweeper:
    """The sweep that fires the crons due (services/orchestrator/crons.py)."""
    return CronSweeper(
        store=store,
        orchestrator=orchestrator,
        clock=clock_of(settings),
        grace=timedelta(seconds=settings.cron_catch_up_grace_seconds),
        claims_kept=timedelta(days=settings.cron_ticks_kept_days),
    )


def abandoned_requests(
    orchestrator: Orchestrator, settings: OrchestratorSettings, store: Store
) -> AbandonedRequests:
    return AbandonedRequests(
        executions=store.executions,
        orchestrator=orchestrator,
        clock=clock_of(settings),
        abandon_after=timedelta(seconds=settings.abandon_undelivered_after_seconds),
    )


def create_app(settings: OrchestratorSettings | None = None) -> FastStream:
    settings = settings or OrchestratorSettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    bus = KafkaBus(settings, SERVICE)
    store = mongo_store(settings)
    erase_checkpoints = functools.partial(erase_mongo_checkpoints, store.database)
    orchestrator, sweeper = register(
        bus, settings, store, bus.publisher, erase_checkpoints=erase_checkpoints
    )
    retention = thread_retention(settings, store, erase_checkpoints)
    abandoned = abandoned_requests(orchestrator, settings, store)
    crons = cron_sweeper(orchestrator, settings, store)
    gauges = ExecutionGauges(store.executions)
    return consumer_app(
        SERVICE,
        settings,
        bus,
        store,
        loops=(
            lambda: sweeper.run_forever(settings.deadline_poll_seconds),
            lambda: abandoned.run_forever(settings.deadline_poll_seconds),
            lambda: retention.run_forever(settings.thread_retention_poll_seconds),
            lambda: crons.run_forever(settings.cron_poll_seconds),
            lambda: gauges.run_forever(settings.metrics_poll_seconds),
        ),
    )
