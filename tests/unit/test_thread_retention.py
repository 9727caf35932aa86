"""Threads past their time to live are deleted by the orchestrator's sweep
(services/orchestrator/thread_retention.py): gone for readers (a tombstone), their ended turns
erased; a thread whose turn has not ended is kept and tried again a poll later; a thread with no
ttl, or not expired yet, is left alone; a deleted thread whose erasure never finished is erased
by the next sweep."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from services.orchestrator.thread_erasure import ThreadEraser
from services.orchestrator.thread_retention import ThreadRetention
from shared.domain.execution import ExecutionStatus, new_pending_execution
from shared.domain.threads import turn_execution_id
from shared.events import AgentInput, ExecutionRequested, ThreadTurn
from shared.store.memories import Tenant, new_item
from shared.store.memory import InMemoryStore
from shared.store.threads import ThreadRecord
from tests import factories as f

SCOPE = f.SCOPE
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
POLL = timedelta(seconds=60)
HOURS_LATER = timedelta(hours=5)


def turn_id(thread: str, number: int) -> str:
    return turn_execution_id(SCOPE["project_id"], SCOPE["workspace_id"], thread, number)


async def thread_with_turns(
    store: InMemoryStore, thread: str, statuses: Sequence[ExecutionStatus], ttl: float | None
) -> None:
    expires = None if ttl is None else T0 + timedelta(minutes=ttl)
    record = ThreadRecord(
        thread_id=thread, created_at=T0, ttl_minutes=ttl, expires_at=expires, **SCOPE
    )
    await store.threads.create(record)
    for number, status in enumerate(statuses, start=1):
        request = ExecutionRequested(
            execution_id=turn_id(thread, number),
            agent="conversation",
            input=AgentInput(message="m", turn=ThreadTurn(thread_id=thread, turn=number)),
            **SCOPE,
        )
        execution, _ = await store.executions.create(new_pending_execution(request, None))
        if status is not ExecutionStatus.PENDING:
            ended = execution.model_copy(update={"status": status, "version": 2})
            assert await store.executions.replace(execution, ended) is not None
        await store.threads.note_turn(SCOPE["project_id"], SCOPE["workspace_id"], thread, number)


class Checkpoints:
    def __init__(self) -> None:
        self.erased: list[str] = []

    async def __call__(self, thread_ids: Sequence[str]) -> None:
        self.erased.extend(thread_ids)


def retention(store: InMemoryStore, checkpoints: Checkpoints, now: datetime) -> ThreadRetention:
    eraser = ThreadEraser(store=store, checkpoints=checkpoints, keep_audit=False)
    return ThreadRetention(store=store, eraser=eraser, clock=lambda: now, retry_after=POLL)


async def read(store: InMemoryStore, thread: str) -> ThreadRecord:
    found = await store.threads.get(SCOPE["project_id"], SCOPE["workspace_id"], thread)
    assert found is not None
    return found


async def test_an_expired_thread_is_deleted_and_its_turns_erased() -> None:
    store = InMemoryStore()
    done = [ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED]
    await thread_with_turns(store, "old", done, ttl=60)
    await thread_with_turns(store, "kept", done, ttl=None)
    await thread_with_turns(store, "young", done, ttl=600)
    checkpoints = Checkpoints()

    swept = await retention(store, checkpoints, T0 + timedelta(hours=2)).sweep()

    assert swept == 1
    assert (await read(store, "old")).deleted
    assert checkpoints.erased == [turn_id("old", 1), turn_id("old", 2)]
    assert await store.executions.get(SCOPE["project_id"], turn_id("old", 1)) is None
    for alive in ("kept", "young"):
        assert not (await read(store, alive)).deleted
        assert await store.executions.get(SCOPE["project_id"], turn_id(alive, 2)) is not None
    # Swept again, nothing more goes.
    assert await retention(store, checkpoints, T0 + timedelta(hours=3)).sweep() == 0


async def test_an_expired_thread_waiting_for_a_turn_is_tried_again_a_poll_later() -> None:
    store = InMemoryStore()
    await thread_with_turns(
        store, "busy", [ExecutionStatus.COMPLETED, ExecutionStatus.SUSPENDED], ttl=60
    )
    checkpoints = Checkpoints()
    now = T0 + timedelta(hours=2)

    assert await retention(store, checkpoints, now).sweep() == 0

    record = await read(store, "busy")
    assert not record.deleted and record.expires_at == now + POLL and record.ttl_minutes == 60
    assert checkpoints.erased == []
    assert await retention(store, checkpoints, now + POLL / 2).sweep() == 0
    assert checkpoints.erased == []


async def test_a_deleted_thread_whose_erasure_never_ran_is_erased_by_the_sweep() -> None:
    """The tombstone is made, and the process dies before the erasure (or its request never
    reached the bus): the sweep finds the erasure still due and does it, once."""
    store = InMemoryStore()
    done = [ExecutionStatus.COMPLETED, ExecutionStatus.CANCELLED]
    await thread_with_turns(store, "orphan", done, ttl=None)
    await store.threads.mark_deleted(SCOPE["project_id"], SCOPE["workspace_id"], "orphan", T0)
    checkpoints = Checkpoints()

    assert await retention(store, checkpoints, T0 + timedelta(seconds=1)).sweep() == 1

    assert checkpoints.erased == [turn_id("orphan", 1), turn_id("orphan", 2)]
    assert await store.executions.get(SCOPE["project_id"], turn_id("orphan", 1)) is None
    record = await read(store, "orphan")
    assert record.deleted and record.expires_at is None
    assert await store.threads.expired(T0 + HOURS_LATER, limit=10) == []
    assert await retention(store, checkpoints, T0 + HOURS_LATER).sweep() == 0
    assert len(checkpoints.erased) == 2


async def test_a_deleted_thread_with_a_turn_still_running_stays_due_until_it_ended() -> None:
    store = InMemoryStore()
    await thread_with_turns(
        store, "racing", [ExecutionStatus.COMPLETED, ExecutionStatus.RUNNING], ttl=None
    )
    await store.threads.mark_deleted(SCOPE["project_id"], SCOPE["workspace_id"], "racing", T0)
    checkpoints = Checkpoints()

    await retention(store, checkpoints, T0 + timedelta(seconds=1)).sweep()

    assert checkpoints.erased == [turn_id("racing", 1)]
    running = await store.executions.get(SCOPE["project_id"], turn_id("racing", 2))
    assert running is not None and running.status is ExecutionStatus.RUNNING
    assert [r.thread_id for r in await store.threads.expired(T0 + HOURS_LATER, limit=10)] == [
        "racing"
    ]


async def test_the_sweep_deletes_memory_items_past_their_ttl_and_no_other() -> None:
    store = InMemoryStore()
    tenant = Tenant("p", "w")
    for key, ttl in (("brief", 1.0), ("kept", None), ("long", 600.0)):
        await store.memories.put(
            new_item(tenant, ("facts",), key, {"k": key}, ttl_minutes=ttl, now=T0)
        )
    await retention(store, Checkpoints(), T0 + timedelta(minutes=2)).sweep()
    left = [i.key async for i in store.memories.search(tenant, (), at_most=None)]
    assert sorted(left) == ["kept", "long"]
