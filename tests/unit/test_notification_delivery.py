"""The notifier's outbox: one delivery per (execution, suspension, channel), retries with
backoff, dead after the last attempt, each attempt made by exactly one replica. An injected
clock; channels are recording stand-ins (the real senders have their own tests)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from services.notifier.app import Notifier, NotifierSettings
from services.notifier.delivery import LOST_CLAIM_AFTER, Dispatcher
from shared.agents import load_registry
from shared.events import ExecutionSuspended, PendingInterrupt, ReviewDeadlineReached
from shared.notifications.config import WebhookConfig
from shared.notifications.model import DeliveryFailed, DeliveryStatus, Notification
from shared.store.memory import InMemoryStore
from shared.store.notifications import NotificationStore


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 11, 30, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by


@dataclass
class RecordingChannel:
    name: str
    failures: list[DeliveryFailed] = field(default_factory=list)
    sent: list[Notification] = field(default_factory=list)

    async def send(self, notification: Notification) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(notification)


def suspended(execution_id: str = "exec-1", suspension_id: int = 1) -> ExecutionSuspended:
    return ExecutionSuspended(
        execution_id=execution_id,
        project_id="demo",
        workspace_id="default",
        agent="refund-approval",
        epoch=suspension_id,
        suspension_id=suspension_id,
        suspend_context={"claim_id": "CLM-4821"},
        allowed_decisions=["approve", "reject"],
        interrupts=[PendingInterrupt(interrupt_id="i-1", value={"claim_id": "CLM-4821"})],
    )


def notifier(store: NotificationStore, *channels: str, clock: Clock | None = None) -> Notifier:
    settings = NotifierSettings(kafka_bootstrap_servers="unused:9092")
    configs = {name: WebhookConfig(type="webhook", url="x", secrets_env="X") for name in channels}
    return Notifier(settings, store, {}, configs, clock=clock or Clock())


def dispatcher(
    store: NotificationStore, clock: Clock, *channels: RecordingChannel, owner: str = "r1"
) -> Dispatcher:
    return Dispatcher(
        store,
        {c.name: c for c in channels},
        clock=clock,
        owner=owner,
        max_attempts=3,
        rng=random.Random(7),
    )


@pytest.fixture
def store() -> NotificationStore:
    return InMemoryStore().notifications


async def test_a_redelivered_suspension_is_notified_once_per_channel(
    store: NotificationStore,
) -> None:
    clock = Clock()
    ops, team = RecordingChannel("ops"), RecordingChannel("team")
    handler = notifier(store, "ops", "team")
    await handler.on_suspended(suspended())
    await handler.on_suspended(suspended())  # Kafka redelivered the event
    assert await dispatcher(store, clock, ops, team).run_once() == 2
    assert await dispatcher(store, clock, ops, team).run_once() == 0
    assert [n.notification_id for n in ops.sent] == ["exec-1:1:ops"]
    assert [n.notification_id for n in team.sent] == ["exec-1:1:team"]
    note = ops.sent[0]
    assert note.suspend_context == {"claim_id": "CLM-4821"}
    assert note.allowed_decisions == ["approve", "reject"]
    assert note.review_url == "http://127.0.0.1:8000/reviews#review=exec-1"
    # A later suspension of the same execution is news again.
    await handler.on_suspended(suspended(suspension_id=2))
    await dispatcher(store, clock, ops, team).run_once()
    assert [n.suspension_id for n in ops.sent] == [1, 2]


async def test_failures_back_off_then_the_delivery_goes_dead_with_the_reason(
    store: NotificationStore,
) -> None:
    clock = Clock()
    flaky = RecordingChannel("ops", failures=[DeliveryFailed("HTTP 503")] * 3)
    await notifier(store, "ops", clock=clock).on_suspended(suspended())
    loop = dispatcher(store, clock, flaky)
    assert await loop.run_once() == 1
    [pending] = await store.due(clock.now + timedelta(days=1))
    assert pending.attempts == 1 and pending.status is DeliveryStatus.PENDING
    assert timedelta(seconds=1) <= pending.next_attempt_at - clock.now <= timedelta(seconds=2)
    assert await loop.run_once() == 0  # not due yet: nothing is hammered
    clock.advance(timedelta(seconds=2))
    assert await loop.run_once() == 1
    [second] = await store.due(clock.now + timedelta(days=1))
    assert timedelta(seconds=2) <= second.next_attempt_at - clock.now <= timedelta(seconds=4)
    clock.advance(timedelta(seconds=4))
    assert await loop.run_once() == 1
    dead = await store.get("demo", "exec-1:1:ops")
    assert dead is not None and dead.status is DeliveryStatus.DEAD and dead.attempts == 3
    assert dead.last_error == "gave up after 3 attempt(s): HTTP 503"
    assert flaky.sent == []
    clock.advance(timedelta(days=1))
    assert await loop.run_once() == 0


async def test_a_failure_retrying_cannot_fix_is_dead_at_once(store: NotificationStore) -> None:
    clock = Clock()
    gone = RecordingChannel("ops", failures=[DeliveryFailed("HTTP 410", retryable=False)])
    await notifier(store, "ops").on_suspended(suspended())
    await dispatcher(store, clock, gone).run_once()
    dead = await store.get("demo", "exec-1:1:ops")
    assert dead is not None and dead.status is DeliveryStatus.DEAD and dead.attempts == 1


async def test_two_replicas_make_each_attempt_once(store: NotificationStore) -> None:
    clock = Clock()
    ops = RecordingChannel("ops")
    handler = notifier(store, "ops")
    for i in range(10):
        await handler.on_suspended(suspended(execution_id=f"exec-{i}"))
    first = dispatcher(store, clock, ops, owner="r1")
    second = dispatcher(store, clock, ops, owner="r2")
    made = await asyncio.gather(first.run_once(), second.run_once())
    assert sum(made) == 10
    assert sorted(n.execution_id for n in ops.sent) == sorted(f"exec-{i}" for i in range(10))


async def test_an_attempt_claimed_by_a_replica_that_died_is_taken_over(
    store: NotificationStore,
) -> None:
    clock = Clock()
    ops = RecordingChannel("ops")
    await notifier(store, "ops", clock=clock).on_suspended(suspended())
    # A replica claimed attempt 1 and died before sending or recording anything.
    assert await store.claim("exec-1:1:ops", 1, "dead-replica")
    survivor = dispatcher(store, clock, ops, owner="r2")
    assert await survivor.run_once() == 0  # it may still be sending: wait
    clock.advance(LOST_CLAIM_AFTER + timedelta(seconds=1))
    assert await survivor.run_once() == 1
    delivered = await store.get("demo", "exec-1:1:ops")
    assert delivered is not None and delivered.status is DeliveryStatus.DELIVERED
    assert delivered.attempts == 2 and len(ops.sent) == 1


async def test_a_channel_removed_from_the_file_ends_its_deliveries_dead(
    store: NotificationStore,
) -> None:
    clock = Clock()
    await notifier(store, "ops").on_suspended(suspended())
    await dispatcher(store, clock).run_once()  # no channel named "ops" any more
    dead = await store.get("demo", "exec-1:1:ops")
    assert dead is not None and dead.status is DeliveryStatus.DEAD
    assert dead.last_error is not None and "not configured" in dead.last_error


async def test_only_the_channels_that_want_the_project_and_agent_get_it(
    store: NotificationStore,
) -> None:
    settings = NotifierSettings(kafka_bootstrap_servers="unused:9092")
    configs = {
        "all": WebhookConfig(type="webhook", url="x", secrets_env="X"),
        "other-project": WebhookConfig(type="webhook", url="x", secrets_env="X", projects=["p2"]),
        "refunds": WebhookConfig(
            type="webhook", url="x", secrets_env="X", agents=["refund-approval"]
        ),
        "sql": WebhookConfig(type="webhook", url="x", secrets_env="X", agents=["sql-ops"]),
    }
    await Notifier(settings, store, {}, configs).on_suspended(suspended())
    due = await store.due(datetime.now(UTC) + timedelta(days=1))
    assert sorted(d.channel for d in due) == ["all", "refunds"]


def deadline(kind: str, escalate_to: list[str] | None = None) -> ReviewDeadlineReached:
    return ReviewDeadlineReached(
        event_id=f"exec-1:1:{kind}",
        execution_id="exec-1",
        project_id="demo",
        workspace_id="default",
        agent="refund-approval",
        suspension_id=1,
        kind=kind,  # type: ignore[arg-type]
        suspend_context={"claim_id": "CLM-4821"},
        allowed_decisions=["approve", "reject"],
        expire_at=datetime(2026, 12, 2, 9, 0, tzinfo=UTC),
        escalate_to=escalate_to or [],
    )


async def test_reminders_go_where_the_request_went_and_escalations_where_declared(
    store: NotificationStore,
) -> None:
    clock = Clock()
    ops, team, boss = RecordingChannel("ops"), RecordingChannel("team"), RecordingChannel("boss")
    handler = notifier(store, "ops", "team", "boss", clock=clock)
    await handler.on_deadline(deadline("remind"))
    await handler.on_deadline(deadline("remind"))  # published twice by racing sweepers
    await handler.on_deadline(deadline("escalate", escalate_to=["boss", "unknown"]))
    await dispatcher(store, clock, ops, team, boss).run_once()
    assert [n.notification_id for n in ops.sent] == ["exec-1:1:remind:ops"]
    assert [n.type for n in team.sent] == ["review.reminder"]
    assert sorted((n.notification_id, n.type) for n in boss.sent) == [
        ("exec-1:1:escalate:boss", "review.escalated"),
        ("exec-1:1:remind:boss", "review.reminder"),
    ]
    assert {n.deadline for n in boss.sent} == {datetime(2026, 12, 2, 9, 0, tzinfo=UTC)}


async def test_the_review_request_says_when_it_expires(store: NotificationStore) -> None:
    clock = Clock()
    ops = RecordingChannel("ops")
    settings = NotifierSettings(kafka_bootstrap_servers="unused:9092")
    configs = {"ops": WebhookConfig(type="webhook", url="x", secrets_env="X")}
    handler = Notifier(
        settings, store, {}, configs, clock=clock, registry=load_registry(settings.agents_file)
    )
    event = suspended()
    await handler.on_suspended(event)
    await dispatcher(store, clock, ops).run_once()
    # refund-approval expires 48 hours after it suspends (agents/agents.toml).
    assert ops.sent[0].deadline == event.suspended_at + timedelta(hours=48)


class CountingLatest:
    """The in-memory store, counting ``latest`` reads."""

    def __init__(self, inner: NotificationStore) -> None:
        self._inner = inner
        self.latest_reads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def latest(self, delivery_id: str) -> object:
        self.latest_reads += 1
        return await self._inner.latest(delivery_id)


async def test_replicas_racing_for_an_attempt_read_nothing_more(store: NotificationStore) -> None:
    """A claim lost to a live replica (the common case with several replicas polling) costs no
    read: only a delivery still listed LOST_CLAIM_AFTER past its due time is looked at again."""
    clock = Clock()
    ops = RecordingChannel("ops")
    await notifier(store, "ops", clock=clock).on_suspended(suspended())
    assert await store.claim("exec-1:1:ops", 1, "other-replica")  # sending it right now
    counting = CountingLatest(store)
    survivor = dispatcher(counting, clock, ops, owner="r2")  # type: ignore[arg-type]
    assert await survivor.run_once() == 0
    assert counting.latest_reads == 0
    clock.advance(LOST_CLAIM_AFTER + timedelta(seconds=1))
    assert await survivor.run_once() == 1
    assert counting.latest_reads == 1 and len(ops.sent) == 1
