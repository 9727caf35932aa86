"""The notifier's outbox on a real MongoDB-compatible server (shared/store/mongo/notifications.py):
the poll reads the pending deliveries only, whatever the history holds; every other read and
write is by ``_id``; and each crash between the outbox write and the history write, in either
direction, leaves nothing lost, stuck or sent twice."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring

from services.notifier.delivery import LOST_CLAIM_AFTER, Dispatcher
from shared.notifications.model import Delivery, DeliveryFailed, DeliveryStatus, Notification
from shared.store.mongo import MongoStore
from shared.store.mongo.notifications import _document, _outbox_document
from tests.conftest import unique_name

pytestmark = pytest.mark.integration

WRITES = {"insert", "update", "delete"}


class Commands(monitoring.CommandListener):
    """Each command's name, collection and filter(s) (``update`` and ``delete`` carry theirs in
    their statements)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, list[Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        if name not in {"find", "aggregate", "count", *WRITES}:
            return
        command = event.command
        if name == "update":
            filters = [u["q"] for u in command["updates"]]
        elif name == "delete":
            filters = [d["q"] for d in command["deletes"]]
        else:
            filters = [command.get("filter")]
        self.seen.append((name, command[name], filters))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def names(self) -> list[tuple[str, str]]:
        return [(name, collection) for name, collection, _ in self.seen]


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 12, 1, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Channel:
    name: str = "ops"
    sent: list[str] = field(default_factory=list)

    async def send(self, notification: Notification) -> None:
        self.sent.append(notification.notification_id)


@dataclass
class FailingOnce:
    inner: Channel
    name: str = "ops"
    failed: bool = False

    async def send(self, notification: Notification) -> None:
        if not self.failed:
            self.failed = True
            raise DeliveryFailed("HTTP 503")
        await self.inner.send(notification)


@dataclass
class World:
    store: MongoStore
    commands: Commands
    clock: Clock
    channel: Channel

    def dispatcher(self) -> Dispatcher:
        return Dispatcher(
            self.store.notifications,
            {self.channel.name: self.channel},
            clock=self.clock,
            owner="r1",
            max_attempts=3,
            rng=random.Random(1),
        )

    def collection(self, name: str) -> Any:
        return self.store.database[name]


@pytest.fixture
async def world(mongodb_uri: str) -> AsyncIterator[World]:
    commands = Commands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, event_listeners=[commands]
    )
    name = unique_name("outbox")
    store = MongoStore(client, name)
    await store.ensure_indexes()
    commands.seen.clear()
    try:
        yield World(store, commands, Clock(), Channel())
    finally:
        await client.drop_database(name)
        await client.close()


def delivery(n: int, clock: Clock, **update: Any) -> Delivery:
    delivery_id = f"exec-{n}:1:ops"
    notification = Notification(
        notification_id=delivery_id,
        project_id="p1",
        workspace_id="w1",
        execution_id=f"exec-{n}",
        agent="refund-approval",
        suspension_id=1,
        review_url="https://interlock.example/reviews",
    )
    made = Delivery(
        delivery_id=delivery_id,
        project_id="p1",
        channel="ops",
        notification=notification,
        next_attempt_at=clock.now,
        updated_at=clock.now,
    )
    return made.model_copy(update=update)


def by_id_only(filters: list[Any]) -> bool:
    return all(set(f) == {"_id"} and isinstance(f["_id"], str) for f in filters)


async def test_an_idle_poll_is_one_query_of_the_outbox_whatever_the_history(world: World) -> None:
    notifications = world.store.notifications
    for n in range(50):
        status = DeliveryStatus.DELIVERED if n % 2 else DeliveryStatus.DEAD
        assert await notifications.enqueue(delivery(n, world.clock, status=status, attempts=1))
    world.commands.seen.clear()
    assert await world.dispatcher().run_once() == 0
    assert world.commands.names() == [("find", "notification_outbox")]
    assert await world.collection("notification_outbox").count_documents({}) == 0


async def test_a_suspension_and_its_attempts_cost_few_commands_all_by_id(world: World) -> None:
    """One channel: the enqueue is 2 inserts; an attempt is its claim and 2 writes (a retry:
    outbox, then history; an outcome: history, then the outbox entry goes), plus the poll."""
    notifications = world.store.notifications
    queued = delivery(1, world.clock)
    assert await notifications.enqueue(queued)
    assert world.commands.names() == [
        ("insert", "notification_outbox"),
        ("insert", "notification_deliveries"),
    ]
    world.commands.seen.clear()
    assert await notifications.enqueue(queued) is False  # Kafka redelivered the event
    assert world.commands.names() == [
        ("insert", "notification_outbox"),
        ("insert", "notification_deliveries"),
    ]

    world.channel.sent.clear()
    flaky = FailingOnce(world.channel)
    world.commands.seen.clear()
    loop = Dispatcher(
        notifications,
        {"ops": flaky},
        clock=world.clock,
        owner="r1",
        max_attempts=3,
        rng=random.Random(1),
    )
    assert await loop.run_once() == 1
    assert world.commands.names() == [
        ("find", "notification_outbox"),
        ("insert", "notification_claims"),
        ("update", "notification_outbox"),
        ("update", "notification_deliveries"),
    ]
    world.clock.now += timedelta(minutes=1)
    world.commands.seen.clear()
    assert await loop.run_once() == 1
    assert world.commands.names() == [
        ("find", "notification_outbox"),
        ("insert", "notification_claims"),
        ("update", "notification_deliveries"),
        ("delete", "notification_outbox"),
    ]
    assert all(by_id_only(f) for name, _, f in world.commands.seen if name in {"update", "delete"})
    stored = await notifications.get("p1", queued.delivery_id)
    assert stored is not None and stored.status is DeliveryStatus.DELIVERED
    assert stored.attempts == 2 and world.channel.sent == [queued.delivery_id]


async def test_an_enqueue_that_died_before_the_history_is_still_sent(world: World) -> None:
    """Outbox written, history not: the poll sends it and the outcome writes the history."""
    queued = delivery(1, world.clock)
    await world.collection("notification_outbox").insert_one(_outbox_document(queued))
    assert await world.store.notifications.get("p1", queued.delivery_id) is None
    assert await world.dispatcher().run_once() == 1
    assert world.channel.sent == [queued.delivery_id]
    stored = await world.store.notifications.get("p1", queued.delivery_id)
    assert stored is not None and stored.status is DeliveryStatus.DELIVERED


async def test_a_suspension_redelivered_after_its_delivery_notifies_no_one(world: World) -> None:
    notifications = world.store.notifications
    queued = delivery(1, world.clock)
    await notifications.enqueue(queued)
    assert await world.dispatcher().run_once() == 1
    assert await notifications.enqueue(queued) is False
    assert await world.collection("notification_outbox").count_documents({}) == 0
    world.clock.now += LOST_CLAIM_AFTER * 2
    assert await world.dispatcher().run_once() == 0
    assert world.channel.sent == [queued.delivery_id]


@pytest.mark.parametrize("attempts", [0, 1], ids=["redelivered-enqueue", "lost-outbox-delete"])
async def test_a_finished_delivery_left_in_the_outbox_is_never_sent_again(
    world: World, attempts: int
) -> None:
    """A crash left an outbox entry behind a delivery finished at its second attempt: a
    redelivered event's enqueue died before deleting the entry it made again (attempts 0), or
    the outcome was written and the process died before deleting the entry (attempts 1, the
    state before the last attempt)."""
    notifications = world.store.notifications
    queued = delivery(1, world.clock)
    await notifications.enqueue(queued)
    loop = Dispatcher(
        notifications,
        {"ops": FailingOnce(world.channel)},
        clock=world.clock,
        owner="r1",
        max_attempts=3,
        rng=random.Random(1),
    )
    assert await loop.run_once() == 1
    world.clock.now += timedelta(minutes=1)
    assert await loop.run_once() == 1
    left = queued.model_copy(update={"attempts": attempts, "next_attempt_at": world.clock.now})
    await world.collection("notification_outbox").insert_one(_outbox_document(left))

    assert await world.dispatcher().run_once() == 0  # its attempt is claimed already
    world.clock.now += LOST_CLAIM_AFTER + timedelta(seconds=1)
    assert await world.dispatcher().run_once() == 0  # now seen finished, and cleared
    assert await world.collection("notification_outbox").count_documents({}) == 0
    assert world.channel.sent == [queued.delivery_id]
    stored = await notifications.get("p1", queued.delivery_id)
    assert stored is not None and stored.status is DeliveryStatus.DELIVERED
    assert stored.attempts == 2


async def test_a_retry_whose_history_write_was_lost_goes_on_from_the_outbox(world: World) -> None:
    """Outbox written, history not (the history lags one attempt): the next attempt is the right
    one and writes the history."""
    notifications = world.store.notifications
    queued = delivery(1, world.clock)
    await notifications.enqueue(queued)
    assert await notifications.claim(queued.delivery_id, 1, "crashed")
    retry = queued.model_copy(update={"attempts": 1, "last_error": "HTTP 503"})
    await world.collection("notification_outbox").replace_one(
        {"_id": queued.delivery_id}, _outbox_document(retry)
    )
    assert await world.dispatcher().run_once() == 1
    stored = await notifications.get("p1", queued.delivery_id)
    assert stored is not None and stored.status is DeliveryStatus.DELIVERED
    assert stored.attempts == 2


async def test_deliveries_pending_before_the_outbox_are_adopted_at_start_up(world: World) -> None:
    """Pending in the history, absent from the outbox (stored by a version without it): the
    start-up adopts them; one that was attempted keeps its attempt count."""
    fresh = delivery(1, world.clock)
    retried = delivery(2, world.clock, attempts=1, last_error="HTTP 503")
    finished = delivery(3, world.clock, status=DeliveryStatus.DELIVERED, attempts=1)
    for old in (fresh, retried, finished):
        await world.collection("notification_deliveries").insert_one(_document(old))
    assert await world.store.notifications.due(world.clock.now) == []
    await world.store.ensure_indexes()
    assert await world.store.notifications.due(world.clock.now) == [fresh, retried]
    assert await world.dispatcher().run_once() == 2
    assert sorted(world.channel.sent) == [fresh.delivery_id, retried.delivery_id]
    again = await world.store.notifications.get("p1", retried.delivery_id)
    assert again is not None and again.attempts == 2


async def test_an_outbox_entry_behind_its_history_takes_the_historys_state(world: World) -> None:
    """A replica of the previous version attempted it (history only): ``latest`` gives the
    history's state, and the outbox entry takes it."""
    notifications = world.store.notifications
    queued = delivery(1, world.clock)
    await notifications.enqueue(queued)
    ahead = queued.model_copy(
        update={"attempts": 2, "next_attempt_at": world.clock.now + timedelta(seconds=5)}
    )
    await world.collection("notification_deliveries").replace_one(
        {"_id": queued.delivery_id}, _document(ahead)
    )
    assert await notifications.latest(queued.delivery_id) == ahead
    assert await notifications.due(world.clock.now + timedelta(seconds=5)) == [ahead]
