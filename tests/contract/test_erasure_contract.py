"""Erasing executions (shared/store/erasure.py) on memory, SQLite and MongoDB (FerretDB): every
record of an erased execution is gone through every port's reads, and another execution's stay,
even one whose id the erased one's is a prefix of; ``keep_audit`` keeps the execution and its
audit (approvals, decision claims, the notification history) and erases its working data; a
second erase removes nothing and fails nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from pymongo import AsyncMongoClient, monitoring

from shared.domain.execution import Execution, ExecutionStatus
from shared.notifications.model import Delivery, DeliveryStatus, Notification
from shared.store.approvals import Approval
from shared.store.links import LinkUse
from shared.store.mongo import MongoStore
from shared.store.ports import Claim, StepRecord, Store
from shared.store.progress import ProgressEntry, progress_key
from tests import factories as f
from tests.conftest import throwaway_mongo_store

NOW = datetime(2025, 3, 4, 12, 0, 0, 123_000, tzinfo=UTC)
ERASED = "8d6f1c2e-0b7a-4f3e-9c51-2a4b6d8e0f13"
KEPT = ERASED + "1"
"""An id the erased one's is a prefix of: its records share every key's first characters."""


@dataclass(frozen=True)
class Stored:
    """What ``populate`` stored of one execution, as the ports return it."""

    execution: Execution
    claim: Claim
    step: StepRecord
    progress: list[ProgressEntry]
    approval: Approval
    delivered: Delivery
    pending: Delivery


def _delivery(execution_id: str, suspension: int, status: DeliveryStatus) -> Delivery:
    delivery_id = f"{execution_id}:{suspension}:webhook"
    return Delivery(
        delivery_id=delivery_id,
        project_id="proj-1",
        channel="webhook",
        notification=Notification(
            notification_id=delivery_id,
            project_id="proj-1",
            workspace_id="ws-1",
            execution_id=execution_id,
            agent="refund-approval",
            suspension_id=suspension,
            review_url=f"https://interlock.example/reviews/{execution_id}",
            created_at=NOW,
        ),
        status=status,
        attempts=1 if status is DeliveryStatus.DELIVERED else 0,
        next_attempt_at=NOW,
        updated_at=NOW,
    )


async def populate(store: Store, execution_id: str) -> Stored:
    """An execution that suspended twice, was decided, ran steps and ended, with its audit."""
    current, _ = await store.executions.create(f.pending(execution_id))
    suspended = f.suspended(execution_id)
    for successor in (
        suspended,
        suspended.model_copy(update={"status": ExecutionStatus.RESUMING}),
        suspended.model_copy(update={"status": ExecutionStatus.COMPLETED, "suspension": None}),
    ):
        stored = await store.executions.replace(current, successor)
        assert stored is not None
        current = stored
    claim = await store.decisions.claim(execution_id, 1, Claim("dec-1", '{"decision": 1}'))
    step = await store.steps.put(
        StepRecord(
            key=f"{execution_id}/charge",
            execution_id=execution_id,
            name="charge",
            result='"ok"',
            epoch=1,
            attempt=2,
        )
    )
    for _ in range(2):
        await store.attempts.begin(execution_id, 1)
    progress = [ProgressEntry(progress_key(1, 2, n), "update", {"n": n}) for n in range(3)]
    await store.progress.append("proj-1", execution_id, progress)
    approval = await store.approvals.record(
        Approval(
            execution_id=execution_id,
            generation=1,
            reviewer="key:a1 (alice)",
            identity="person:alice@example.com",
            answer_key="k",
            summary="approve",
            at=NOW,
        )
    )
    await store.spent_links.spend(
        LinkUse(
            link_id=f"link-of-{execution_id}",
            execution_id=execution_id,
            generation=1,
            recipient="alice@example.com",
            decision="approve",
        )
    )
    # One delivery sent (claimed, then recorded delivered), one still pending.
    delivered = _delivery(execution_id, 1, DeliveryStatus.PENDING)
    assert await store.notifications.enqueue(delivered)
    assert await store.notifications.claim(delivered.delivery_id, 1, "notifier-1")
    delivered = delivered.model_copy(update={"status": DeliveryStatus.DELIVERED, "attempts": 1})
    await store.notifications.record(delivered)
    pending = _delivery(execution_id, 2, DeliveryStatus.PENDING)
    assert await store.notifications.enqueue(pending)
    return Stored(current, claim, step, progress, approval, delivered, pending)


async def assert_intact(store: Store, stored: Stored) -> None:
    eid = stored.execution.execution_id
    assert await store.executions.get("proj-1", eid) == stored.execution
    assert await store.decisions.holder(eid, 1) == stored.claim
    assert await store.steps.load(eid) == {stored.step.key: stored.step}
    assert await store.steps.get(stored.step.key) == stored.step
    assert await store.attempts.is_superseded(eid, 1, 1) is True
    assert await store.progress.after("proj-1", eid, "") == stored.progress
    assert await store.approvals.list(eid, 1) == [stored.approval]
    assert await store.spent_links.spent(f"link-of-{eid}") is True
    assert await store.notifications.get("proj-1", stored.delivered.delivery_id) == stored.delivered
    assert await store.notifications.latest(stored.pending.delivery_id) == stored.pending
    assert stored.pending.delivery_id in [d.delivery_id for d in await due(store)]
    # The delivered attempt's claim is held: claiming it again is refused.
    assert await store.notifications.claim(stored.delivered.delivery_id, 1, "other") is False


async def assert_working_data_gone(store: Store, stored: Stored) -> None:
    eid = stored.execution.execution_id
    assert await store.steps.load(eid) == {}
    assert await store.steps.get(stored.step.key) is None
    assert await store.attempts.is_superseded(eid, 1, 1) is False
    assert await store.progress.after("proj-1", eid, "") == []


async def due(store: Store) -> list[Delivery]:
    return await store.notifications.due(NOW + timedelta(days=1), limit=100)


async def test_erasing_removes_every_record_of_the_execution_and_only_its(store: Store) -> None:
    erased, kept = await populate(store, ERASED), await populate(store, KEPT)
    assert await store.erasure.erase([ERASED], keep_audit=False) > 0
    await assert_working_data_gone(store, erased)
    assert await store.executions.get("proj-1", ERASED) is None
    assert await store.decisions.holder(ERASED, 1) is None
    assert await store.approvals.list(ERASED, 1) == []
    assert await store.spent_links.spent(f"link-of-{ERASED}") is False
    for delivery in (erased.delivered, erased.pending):
        assert await store.notifications.get("proj-1", delivery.delivery_id) is None
        assert await store.notifications.latest(delivery.delivery_id) is None
    assert [d.delivery_id for d in await due(store)] == [kept.pending.delivery_id]
    listed, _ = await store.notifications.list("proj-1", limit=10)
    assert {d.delivery_id for d in listed} == {kept.delivered.delivery_id, kept.pending.delivery_id}
    page = await store.executions.list("proj-1", "ws-1")
    assert [e.execution_id for e in page.items] == [KEPT]
    # The claim went with its delivery: the attempt can be claimed again.
    assert await store.notifications.claim(erased.delivered.delivery_id, 1, "other") is True
    await assert_intact(store, kept)


async def test_keeping_the_audit_erases_only_the_working_data(store: Store) -> None:
    erased, kept = await populate(store, ERASED), await populate(store, KEPT)
    assert await store.erasure.erase([ERASED], keep_audit=True) > 0
    await assert_working_data_gone(store, erased)
    assert await store.executions.get("proj-1", ERASED) == erased.execution
    assert await store.decisions.holder(ERASED, 1) == erased.claim
    assert await store.approvals.list(ERASED, 1) == [erased.approval]
    assert await store.spent_links.spent(f"link-of-{ERASED}") is True
    assert await store.notifications.get("proj-1", erased.delivered.delivery_id) == (
        erased.delivered
    )
    assert await store.notifications.get("proj-1", erased.pending.delivery_id) == erased.pending
    # A delivery still pending is kept due, as it would have been: the audit says it was sent.
    assert erased.pending.delivery_id in [d.delivery_id for d in await due(store)]
    assert await store.notifications.claim(erased.delivered.delivery_id, 1, "other") is False
    await assert_intact(store, kept)
    # Erasing all of it afterwards takes the rest.
    assert await store.erasure.erase([ERASED], keep_audit=False) > 0
    assert await store.executions.get("proj-1", ERASED) is None
    await assert_intact(store, kept)


@pytest.mark.parametrize("keep_audit", [False, True])
async def test_erasing_again_removes_nothing(store: Store, keep_audit: bool) -> None:
    await populate(store, ERASED)
    kept = await populate(store, KEPT)
    assert await store.erasure.erase([ERASED, ERASED], keep_audit=keep_audit) > 0
    assert await store.erasure.erase([ERASED], keep_audit=keep_audit) == 0
    assert await store.erasure.erase([], keep_audit=keep_audit) == 0
    assert await store.erasure.erase(["never-stored"], keep_audit=keep_audit) == 0
    await assert_intact(store, kept)


async def test_a_batch_erases_each_of_its_executions(store: Store) -> None:
    ids = [f"{ERASED[:-2]}{n:02d}" for n in range(12)]
    for eid in ids:
        await populate(store, eid)
    kept = await populate(store, KEPT)
    assert await store.erasure.erase(ids, keep_audit=False) > 0
    for eid in ids:
        assert await store.executions.get("proj-1", eid) is None
        assert await store.steps.load(eid) == {}
        assert await store.progress.after("proj-1", eid, "") == []
    await assert_intact(store, kept)


async def test_an_id_that_is_not_one_is_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.erasure.erase([f"{KEPT}:1"], keep_audit=False)


@pytest.mark.integration
@pytest.mark.parametrize("keep_audit", [False, True])
async def test_mongo_leaves_no_document_of_the_execution_in_any_collection(
    mongodb_uri: str, keep_audit: bool
) -> None:
    """Whatever collection holds it, under whatever key: the raw documents, including waiting
    markers a writer that died left behind, in a few commands whatever the batch."""
    async with throwaway_mongo_store(mongodb_uri, "erasure") as store:
        await populate(store, ERASED)
        await populate(store, KEPT)
        for eid in (ERASED, KEPT):  # markers left by writers that died mid-write
            for name in ("suspended_executions", "undelivered_executions"):
                await store.database[name].insert_one(
                    {"_id": f"{eid}|000000000001.000000000001", "execution_id": eid}
                )
        before = await documents_of(store, KEPT)
        commands = await count_commands(mongodb_uri, store._database_name, [ERASED], keep_audit)
        assert commands == (5 if keep_audit else 14)
        assert await documents_of(store, KEPT) == before
        left = await documents_of(store, ERASED)
        audit = {
            "executions",
            "execution_versions",
            "decision_claims",
            "approvals",
            "approval_slots",
            "spent_links",
            "notification_deliveries",
            "notification_outbox",  # the pending delivery, still due
            "notification_claims",
        }
        assert set(left) == (audit if keep_audit else set())


async def documents_of(store: MongoStore, eid: str) -> dict[str, int]:
    """How many documents of each collection belong to ``eid``, by key or field."""
    found = {}
    for name in await store.database.list_collection_names():
        n = 0
        async for document in store.database[name].find({}):
            key = str(document["_id"])
            if (
                key == eid
                or key.startswith((f"{eid}:", f"{eid}|", f"{eid}/"))
                or document.get("execution_id") == eid
            ):
                n += 1
        if n:
            found[name] = n
    return found


async def count_commands(uri: str, database: str, ids: list[str], keep_audit: bool) -> int:
    """How many commands one erase sends (each a delete), on a client that counts them."""
    listener = CommandNames()
    counted = MongoStore(AsyncMongoClient(uri, tz_aware=True, event_listeners=[listener]), database)
    try:
        await counted.erasure.erase(ids, keep_audit=keep_audit)
        names = list(listener.names)
    finally:
        await counted.close()
    assert set(names) == {"delete"}
    return len(names)


class CommandNames(monitoring.CommandListener):
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None: ...

    def failed(self, event: monitoring.CommandFailedEvent) -> None: ...
