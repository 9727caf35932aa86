"""The notification delivery store contract, run against memory, SQLite and MongoDB (FerretDB)."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.notifications.model import Delivery, DeliveryStatus, Notification
from shared.store.cursor import InvalidCursor, encode_cursor
from shared.store.ports import Store

# Microseconds and a non-UTC offset on purpose: a stored delivery must read back equal.
NOW = datetime(2025, 3, 4, 12, 0, 0, 123_456, tzinfo=UTC)
PLUS_TWO = timezone(timedelta(hours=2))


def delivery(
    delivery_id: str,
    *,
    project_id: str = "p1",
    workspace_id: str = "ws-1",
    status: DeliveryStatus = DeliveryStatus.PENDING,
    next_attempt_at: datetime = NOW,
    updated_at: datetime = NOW,
) -> Delivery:
    execution_id = delivery_id.split(":")[0]
    notification = Notification(
        notification_id=delivery_id,
        project_id=project_id,
        workspace_id=workspace_id,
        execution_id=execution_id,
        agent="refund-approval",
        suspension_id=1,
        suspend_context={"claim_id": "CLM-4821", "a.b": {"$where": [1.5, None]}},
        allowed_decisions=["approve", "reject"],
        deadline=NOW.astimezone(PLUS_TWO) + timedelta(hours=4, microseconds=7),
        review_url=f"https://interlock.example/reviews/{execution_id}",
        created_at=NOW - timedelta(microseconds=999),
    )
    return Delivery(
        delivery_id=delivery_id,
        project_id=project_id,
        channel="webhook",
        notification=notification,
        status=status,
        next_attempt_at=next_attempt_at,
        updated_at=updated_at,
    )


async def test_enqueue_stores_a_delivery_once(store: Store) -> None:
    first = delivery("ex-1:1:webhook")
    assert await store.notifications.enqueue(first) is True
    again = first.model_copy(update={"attempts": 3, "status": DeliveryStatus.DEAD})
    assert await store.notifications.enqueue(again) is False
    assert await store.notifications.get("p1", first.delivery_id) == first


async def test_due_is_pending_deliveries_up_to_now_oldest_first(store: Store) -> None:
    later = delivery("ex-later", next_attempt_at=NOW - timedelta(minutes=2))
    earliest = delivery("ex-earliest", project_id="p2", next_attempt_at=NOW - timedelta(hours=1))
    exactly_now = delivery("ex-now", next_attempt_at=NOW.astimezone(PLUS_TWO))
    future = delivery("ex-future", next_attempt_at=NOW + timedelta(microseconds=1))
    delivered = delivery(
        "ex-delivered", status=DeliveryStatus.DELIVERED, next_attempt_at=NOW - timedelta(hours=2)
    )
    dead = delivery("ex-dead", status=DeliveryStatus.DEAD, next_attempt_at=NOW - timedelta(hours=3))
    for d in (future, later, dead, exactly_now, delivered, earliest):
        assert await store.notifications.enqueue(d)

    assert await store.notifications.due(NOW) == [earliest, later, exactly_now]
    assert await store.notifications.due(NOW, limit=2) == [earliest, later]
    assert await store.notifications.due(NOW - timedelta(days=1)) == []


async def test_exactly_one_of_concurrent_claimers_gets_an_attempt(store: Store) -> None:
    results = await asyncio.gather(
        *(store.notifications.claim("ex-1:1:slack", 1, f"notifier-{n}") for n in range(10))
    )
    assert sorted(results) == [False] * 9 + [True]
    assert await store.notifications.claim("ex-1:1:slack", 1, "notifier-0") is False
    assert await store.notifications.claim("ex-1:1:slack", 1, "late-replica") is False
    assert await store.notifications.claim("ex-1:1:slack", 2, "notifier-0") is True
    assert await store.notifications.claim("ex-1:1:slack", 2, "notifier-1") is False
    # Another delivery's attempt 1, including one whose id is a prefix of the first.
    assert await store.notifications.claim("ex-1:1:email", 1, "notifier-1") is True
    assert await store.notifications.claim("ex-1:1", 1, "notifier-1") is True


async def test_claims_need_a_positive_attempt_number(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.notifications.claim("ex-1:1:slack", 0, "notifier-0")


async def test_record_stores_the_state_after_an_attempt(store: Store) -> None:
    queued = delivery("ex-1:1:webhook")
    await store.notifications.enqueue(queued)
    retry = queued.model_copy(
        update={
            "attempts": 1,
            "last_error": "HTTP 503",
            "next_attempt_at": NOW + timedelta(seconds=30, microseconds=1),
            "updated_at": NOW + timedelta(microseconds=5),
        }
    )
    await store.notifications.record(retry)
    assert await store.notifications.get("p1", queued.delivery_id) == retry
    assert await store.notifications.due(NOW) == []
    assert await store.notifications.due(NOW + timedelta(minutes=1)) == [retry]

    delivered = retry.model_copy(
        update={"attempts": 2, "status": DeliveryStatus.DELIVERED, "last_error": None}
    )
    await store.notifications.record(delivered)
    assert await store.notifications.get("p1", queued.delivery_id) == delivered
    assert await store.notifications.due(NOW + timedelta(minutes=1)) == []


async def test_get_is_scoped_by_project(store: Store) -> None:
    mine = delivery("ex-1:1:webhook")
    await store.notifications.enqueue(mine)
    assert await store.notifications.get("p1", mine.delivery_id) == mine
    assert await store.notifications.get("other-project", mine.delivery_id) is None
    assert await store.notifications.get("p1", "ex-missing:1:webhook") is None


async def test_list_filters_by_status_and_project(store: Store) -> None:
    pending = delivery("ex-a", updated_at=NOW)
    dead = delivery("ex-b", status=DeliveryStatus.DEAD, updated_at=NOW + timedelta(seconds=1))
    delivered = delivery(
        "ex-c", status=DeliveryStatus.DELIVERED, updated_at=NOW - timedelta(days=1)
    )
    elsewhere = delivery("ex-d", project_id="p2")
    for d in (dead, pending, delivered, elsewhere):
        await store.notifications.enqueue(d)

    assert await store.notifications.list("p1") == ([delivered, pending, dead], None)
    assert await store.notifications.list("p1", status=DeliveryStatus.DEAD) == ([dead], None)
    assert await store.notifications.list("p1", status=DeliveryStatus.PENDING) == ([pending], None)
    assert await store.notifications.list("p3") == ([], None)


async def test_list_pages_oldest_first_with_a_cursor(store: Store) -> None:
    # Two share an updated_at: the delivery id orders them.
    times = [NOW + timedelta(microseconds=n) for n in (3, 0, 2, 2, 1)]
    deliveries = [delivery(f"ex-{n}", updated_at=t) for n, t in enumerate(times)]
    deliveries.append(delivery("ex-dead", status=DeliveryStatus.DEAD))
    for d in deliveries:
        await store.notifications.enqueue(d)
    expected = sorted(deliveries[:5], key=lambda d: (d.updated_at, d.delivery_id))

    seen: list[Delivery] = []
    cursor: str | None = None
    for _ in range(3):
        page, cursor = await store.notifications.list(
            "p1", status=DeliveryStatus.PENDING, limit=2, cursor=cursor
        )
        assert len(page) <= 2
        seen.extend(page)
        if cursor is None:
            break
    assert seen == expected and cursor is None

    # A page that ends exactly at the last item has no next cursor.
    page, cursor = await store.notifications.list("p1", status=DeliveryStatus.PENDING, limit=5)
    assert (page, cursor) == (expected, None)


async def test_list_by_workspaces_pages_only_theirs(store: Store) -> None:
    """A key limited to some workspaces gets their deliveries only, and a cursor that never
    points into another workspace (issue 17: cursors leaked other workspaces' deliveries)."""
    mine = [
        delivery(f"ex-{n}", workspace_id="ws-mine", updated_at=NOW + timedelta(seconds=2 * n))
        for n in range(3)
    ]
    theirs = [
        delivery(
            f"ex-t{n}", workspace_id="ws-theirs", updated_at=NOW + timedelta(seconds=2 * n + 1)
        )
        for n in range(3)
    ]
    for d in (*mine, *theirs):
        await store.notifications.enqueue(d)
    seen: list[Delivery] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.notifications.list(
            "p1", limit=1, cursor=cursor, workspaces=["ws-mine"]
        )
        seen.extend(page)
        if cursor is None:
            break
    assert seen == mine
    both = await store.notifications.list("p1", workspaces=["ws-mine", "ws-theirs"])
    assert len(both[0]) == 6
    assert await store.notifications.list("p1", workspaces=[]) == ([], None)


@pytest.mark.parametrize(
    "forged",
    [
        "not-a-cursor",
        base64.urlsafe_b64encode(b'{"a": 1}').decode(),
        encode_cursor("yesterday", "ex-1"),
        encode_cursor("2025-03-04T12:00:00+00:00", "ex-1"),  # a time, but not one we wrote
    ],
)
async def test_list_rejects_a_forged_cursor(store: Store, forged: str) -> None:
    await store.notifications.enqueue(delivery("ex-1"))
    with pytest.raises(InvalidCursor):
        await store.notifications.list("p1", cursor=forged)


async def test_the_poll_lists_only_what_is_still_pending(store: Store) -> None:
    """Deliveries leave ``due`` as they finish, whatever the history holds (MongoDB: an outbox
    apart from the history; SQLite: an index led by the status)."""
    queued = [
        delivery(f"ex-{n}:1:webhook", next_attempt_at=NOW - timedelta(seconds=n)) for n in range(4)
    ]
    for d in queued:
        await store.notifications.enqueue(d)
    delivered = queued[0].model_copy(update={"attempts": 1, "status": DeliveryStatus.DELIVERED})
    dead = queued[1].model_copy(update={"attempts": 1, "status": DeliveryStatus.DEAD})
    retry = queued[2].model_copy(
        update={"attempts": 1, "next_attempt_at": NOW + timedelta(hours=1)}
    )
    for outcome in (delivered, dead, retry):
        await store.notifications.record(outcome)
    assert await store.notifications.due(NOW) == [queued[3]]
    assert await store.notifications.due(NOW + timedelta(days=1)) == [queued[3], retry]
    # The history keeps them all, for the API.
    listed, _ = await store.notifications.list("p1")
    assert sorted(d.delivery_id for d in listed) == sorted(d.delivery_id for d in queued)


async def test_a_retry_recorded_after_the_delivery_finished_is_dropped(store: Store) -> None:
    """A replica frozen past the lost-claim takeover records its attempt's failure after
    another replica delivered: the delivery stays delivered and never comes due again."""
    queued = delivery("ex-1:1:webhook")
    await store.notifications.enqueue(queued)
    delivered = queued.model_copy(update={"attempts": 2, "status": DeliveryStatus.DELIVERED})
    await store.notifications.record(delivered)
    late = queued.model_copy(update={"attempts": 1, "last_error": "timed out"})
    await store.notifications.record(late)
    assert await store.notifications.get("p1", queued.delivery_id) == delivered
    assert await store.notifications.latest(queued.delivery_id) == delivered
    assert await store.notifications.due(NOW + timedelta(days=1)) == []


async def test_latest_is_the_current_state_read_by_id(store: Store) -> None:
    queued = delivery("ex-1:1:webhook")
    await store.notifications.enqueue(queued)
    assert await store.notifications.latest(queued.delivery_id) == queued
    retry = queued.model_copy(update={"attempts": 1, "last_error": "HTTP 503"})
    await store.notifications.record(retry)
    assert await store.notifications.latest(queued.delivery_id) == retry
    dead = retry.model_copy(update={"attempts": 2, "status": DeliveryStatus.DEAD})
    await store.notifications.record(dead)
    assert await store.notifications.latest(queued.delivery_id) == dead
    assert await store.notifications.latest("ex-missing:1:webhook") is None
