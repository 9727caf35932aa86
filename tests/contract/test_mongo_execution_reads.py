"""The MongoDB execution store on a real server: point reads and writes by ``_id`` only, a head
that may trail the log but is read past and repaired, never goes back for long, and old versions
cut down to stubs (never deleted) when an execution ends. Also what each operation costs, in
commands: the hot path's budget (tests/e2e/test_store_commands.py) rests on these."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from pymongo.asynchronous.collection import AsyncCollection

from shared.domain.deadlines import Deadlines
from shared.domain.execution import Execution, ExecutionStatus
from shared.store.mongo import Document, MongoStore
from tests import factories as f
from tests.conftest import throwaway_mongo_store

pytestmark = pytest.mark.integration

COLLECTIONS = (
    "execution_versions",
    "executions",
    "decision_claims",
    "undelivered_executions",
    "suspended_executions",
)
COMMANDS = ("find", "insert", "update", "delete", "findAndModify")


@pytest.fixture
async def mongo(mongodb_uri: str) -> AsyncIterator[MongoStore]:
    async with throwaway_mongo_store(mongodb_uri, "reads") as store:
        yield store


async def written(store: MongoStore, execution_id: str, versions: int) -> Execution:
    execution, _ = await store.executions.create(f.pending(execution_id))
    for epoch in range(1, versions):
        stored = await store.executions.replace(
            execution, execution.model_copy(update={"epoch": epoch})
        )
        assert stored is not None
        execution = stored
    return execution


def collection(store: MongoStore, name: str) -> AsyncCollection[Document]:
    return store.database[name]


async def set_head(store: MongoStore, execution_id: str, version: int) -> None:
    """The head as a writer that died (or was slow) would have left it."""
    document = await collection(store, "execution_versions").find_one(
        {"_id": f"{execution_id}:{version:012d}"}
    )
    assert document is not None
    await collection(store, "executions").replace_one(
        {"_id": execution_id}, {k: v for k, v in document.items() if k != "_id"}
    )


async def head_version(store: MongoStore, execution_id: str) -> int | None:
    head = await collection(store, "executions").find_one({"_id": execution_id})
    return None if head is None else int(head["version"])


def _counts() -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for name in COLLECTIONS:
        for command in COMMANDS:
            value = REGISTRY.get_sample_value(
                "interlock_store_command_seconds_count",
                {"command": command, "collection": name},
            )
            counts[(name, command)] = int(value or 0)
    return counts


@contextmanager
def counted() -> Iterator[Counter[tuple[str, str]]]:
    """The commands sent inside the block, by (collection, command)."""
    spent: Counter[tuple[str, str]] = Counter()
    before = _counts()
    yield spent
    spent.update({k: n for k, n in (_counts() - before).items() if n})


async def test_a_head_left_behind_by_a_dead_writer_is_read_past_and_repaired(
    mongo: MongoStore,
) -> None:
    await written(mongo, "exec-a", 3)
    await set_head(mongo, "exec-a", 2)  # the writer of version 3 died before its head
    latest = await mongo.executions.get("proj-1", "exec-a")
    assert latest is not None and latest.version == 3 and latest.epoch == 2
    assert await head_version(mongo, "exec-a") == 3


async def test_an_execution_of_the_previous_layout_without_a_head_is_read_from_its_log(
    mongo: MongoStore,
) -> None:
    # Before this layout, create inserted version 1 in the log, then the head; its creator died
    # in between.
    first = f.pending("exec-b").model_copy(update={"version": 1})
    await collection(mongo, "execution_versions").insert_one(
        {
            "_id": "exec-b:000000000001",
            "execution_id": "exec-b",
            "project_id": "proj-1",
            "version": 1,
            "body": first.model_dump_json(),
        }
    )
    assert await mongo.executions.get("proj-1", "exec-b") == first
    assert await head_version(mongo, "exec-b") == 1
    again, created = await mongo.executions.create(f.pending("exec-b"))
    assert not created and again == first


async def test_a_head_older_than_the_epoch_asked_for_is_read_past(mongo: MongoStore) -> None:
    await written(mongo, "exec-f", 3)  # epochs 0, 1, 2
    await set_head(mongo, "exec-f", 2)  # epoch 1: the writer of version 3 died before its head
    behind = await mongo.executions.get("proj-1", "exec-f", min_epoch=1)
    assert behind is not None and behind.version == 2  # as new as asked for: enough
    latest = await mongo.executions.get("proj-1", "exec-f", min_epoch=2)
    assert latest is not None and latest.version == 3 and latest.epoch == 2
    assert await head_version(mongo, "exec-f") == 3


async def test_the_head_never_goes_back(mongo: MongoStore) -> None:
    await written(mongo, "exec-c", 4)
    v2 = await collection(mongo, "execution_versions").find_one({"_id": "exec-c:000000000002"})
    assert v2 is not None
    # A slow writer of version 2 writing its head after version 4's writer did: the head it
    # replaced comes back newer, and it puts the newest back.
    await mongo.executions._write_head(v2)
    assert await head_version(mongo, "exec-c") == 4


async def test_an_ended_execution_keeps_every_versions_id_as_a_stub(mongo: MongoStore) -> None:
    current = await written(mongo, "exec-d", 6)
    ended = await mongo.executions.replace(
        current, current.model_copy(update={"status": ExecutionStatus.COMPLETED})
    )
    assert ended is not None and ended.version == 7
    versions = {
        d["version"]: d
        async for d in collection(mongo, "execution_versions").find({"execution_id": "exec-d"})
    }
    assert sorted(versions) == [2, 3, 4, 5, 6, 7]  # version 1 was the head's first content
    assert "body" in versions[7]
    for version in range(2, 7):
        assert "body" not in versions[version] and versions[version]["superseded_by"] == 7
    # A head left on an old version (a slow writer that died) is read past through the stubs.
    await set_head(mongo, "exec-d", 7)
    await collection(mongo, "executions").replace_one(
        {"_id": "exec-d"}, {**{k: v for k, v in versions[7].items() if k != "_id"}, "version": 3}
    )
    assert await mongo.executions.get("proj-1", "exec-d") == ended
    assert await mongo.executions.get("proj-1", "exec-d", min_epoch=0) is not None


async def test_what_each_operation_costs(mongo: MongoStore) -> None:
    with counted() as spent:
        created, _ = await mongo.executions.create(f.pending("exec-e"))
    assert spent == {("executions", "insert"): 1}

    with counted() as spent:
        assert await mongo.executions.get("proj-1", "exec-e", min_epoch=0) == created
    assert spent == {("executions", "find"): 1}

    with counted() as spent:
        running = await mongo.executions.replace(
            created, created.model_copy(update={"status": ExecutionStatus.RUNNING})
        )
    assert running is not None
    assert spent == {("execution_versions", "insert"): 1, ("executions", "findAndModify"): 1}

    with counted() as spent:
        assert await mongo.executions.get("proj-1", "exec-e") == running
    assert spent == {("executions", "find"): 1, ("execution_versions", "find"): 1}

    with counted() as spent:
        assert await mongo.executions.get("proj-1", "exec-e", min_epoch=0) == running
    assert spent == {("executions", "find"): 1}

    with counted() as spent:
        assert await mongo.executions.replace(created, created) is None
    assert spent == {("execution_versions", "insert"): 1}

    with counted() as spent:
        ended = await mongo.executions.replace(
            running, running.model_copy(update={"status": ExecutionStatus.COMPLETED})
        )
    assert ended is not None
    assert spent == {
        ("execution_versions", "insert"): 1,
        ("executions", "findAndModify"): 1,
        ("execution_versions", "update"): 1,
    }

    with counted() as spent:
        assert await mongo.decisions.holder("exec-e", 1) is None
    assert spent == {("decision_claims", "find"): 1}


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def waiting_on_a_deadline(execution_id: str, at: datetime) -> Execution:
    base = f.suspended(execution_id)
    assert base.suspension is not None
    suspension = base.suspension.model_copy(update={"deadlines": Deadlines(expire_at=at)})
    return base.model_copy(update={"suspension": suspension})


async def finished(store: MongoStore, execution_id: str) -> None:
    execution = await written(store, execution_id, 2)
    ended = await store.executions.replace(
        execution, execution.model_copy(update={"status": ExecutionStatus.COMPLETED})
    )
    assert ended is not None


async def sweep_costs(store: MongoStore) -> Counter[tuple[str, str]]:
    with counted() as spent:
        due = await store.executions.due_deadlines(NOW)
        undelivered = await store.executions.undelivered_before(NOW)
    assert [e.execution_id for e in due] == ["dl-due"]
    assert undelivered == []
    return spent


async def test_the_sweeps_read_markers_and_cost_the_same_whatever_the_history(
    mongo: MongoStore,
) -> None:
    await mongo.executions.create(waiting_on_a_deadline("dl-due", NOW - timedelta(minutes=1)))
    await mongo.executions.create(waiting_on_a_deadline("dl-later", NOW + timedelta(hours=1)))
    alone = await sweep_costs(mongo)
    for n in range(40):
        await finished(mongo, f"history-{n}")
    assert await sweep_costs(mongo) == alone
    # One query per sweep over its markers; the due execution read by _id (head and probe).
    assert alone == Counter(
        {
            ("suspended_executions", "find"): 1,
            ("undelivered_executions", "find"): 1,
            ("executions", "find"): 1,
            ("execution_versions", "find"): 1,
        }
    )


async def test_executions_that_wait_on_nothing_write_no_markers(mongo: MongoStore) -> None:
    with counted() as spent:
        await finished(mongo, "plain")
    assert not any(name in ("suspended_executions", "undelivered_executions") for name, _ in spent)


async def test_a_stale_marker_is_never_returned_and_removed_once_old(mongo: MongoStore) -> None:
    await mongo.executions.create(f.suspended("dl-stale"))  # its own marker: no deadline
    markers = collection(mongo, "suspended_executions")
    stale_id = "dl-stale|000000000009.000000000009"

    async def marker(written: datetime) -> None:
        # What a writer leaves when it adds its marker and then loses its compare-and-set, or
        # dies before removing the one of a suspension that ended.
        await markers.replace_one(
            {"_id": stale_id},
            {
                "execution_id": "dl-stale",
                "project_id": "proj-1",
                "workspace_id": "ws-1",
                "created_key": "2026-11-30T10:00:00+00:00",
                "key": "000000000009.000000000009",
                "deadline_key": "2026-11-30T11:00:00.000000Z",
                "written": written,
            },
            upsert=True,
        )

    await marker(datetime.now(UTC))
    assert await mongo.executions.due_deadlines(NOW) == []
    assert await markers.count_documents({"_id": stale_id}) == 1  # young: may be on its way
    await marker(datetime.now(UTC) - timedelta(minutes=2))
    assert await mongo.executions.due_deadlines(NOW) == []
    assert await markers.count_documents({"_id": stale_id}) == 0
    assert await markers.count_documents({}) == 1  # the execution's own stays


async def test_a_deadline_left_behind_by_its_writer_is_repaired_from_the_execution(
    mongo: MongoStore,
) -> None:
    """A deadline fired, and its writer died between its head write and the marker's update:
    the marker holds the earlier, due deadline, so the sweep finds it and sets the next one."""
    later = NOW + timedelta(hours=1)
    await mongo.executions.create(waiting_on_a_deadline("dl-moved", later))
    markers = collection(mongo, "suspended_executions")
    marker = await markers.find_one({"execution_id": "dl-moved"})
    assert marker is not None and marker["deadline_key"] == "2026-11-30T13:00:00.000000Z"
    earlier = "2026-11-30T11:00:00.000000Z"
    await markers.update_one({"_id": marker["_id"]}, {"$set": {"deadline_key": earlier}})
    assert await mongo.executions.due_deadlines(NOW) == []
    repaired = await markers.find_one({"_id": marker["_id"]})
    assert repaired is not None and repaired["deadline_key"] == marker["deadline_key"]


async def test_a_deadline_whose_writer_died_before_its_head_still_fires(mongo: MongoStore) -> None:
    running = await written(mongo, "dl-dead-writer", 2)
    waiting = waiting_on_a_deadline("dl-dead-writer", NOW - timedelta(minutes=1))
    stored = await mongo.executions.replace(running, waiting)
    assert stored is not None and stored.version == 3
    await set_head(mongo, "dl-dead-writer", 2)  # its writer died before the head write
    due = await mongo.executions.due_deadlines(NOW)
    assert [(e.execution_id, e.version) for e in due] == [("dl-dead-writer", 3)]


async def test_executions_waiting_before_markers_existed_are_marked_once(
    mongo: MongoStore,
) -> None:
    await mongo.executions.create(waiting_on_a_deadline("dl-old", NOW - timedelta(minutes=1)))
    await collection(mongo, "suspended_executions").delete_many({})
    await collection(mongo, "store_migrations").delete_many({})
    assert await mongo.executions.due_deadlines(NOW) == []  # as an upgraded store starts
    await mongo.executions.ensure_indexes()
    assert [e.execution_id for e in await mongo.executions.due_deadlines(NOW)] == ["dl-old"]
    await collection(mongo, "suspended_executions").delete_many({})
    await mongo.executions.ensure_indexes()  # done once: no second scan of the heads
    assert await mongo.executions.due_deadlines(NOW) == []


async def pending_reviews_costs(store: MongoStore) -> Counter[tuple[str, str]]:
    with counted() as spent:
        page = await store.executions.list("proj-1", "ws-1", status=ExecutionStatus.SUSPENDED)
    assert [e.execution_id for e in page.items] == ["waiting"]
    return spent


async def test_the_pending_reviews_list_reads_markers_whatever_the_history(
    mongo: MongoStore,
) -> None:
    running = await written(mongo, "waiting", 2)
    suspended = f.suspended("waiting").model_copy(update={"epoch": running.epoch})
    assert await mongo.executions.replace(running, suspended) is not None
    alone = await pending_reviews_costs(mongo)
    for n in range(40):
        await finished(mongo, f"history-{n}")
    # A suspension that ended: its marker is gone, and the list does not show it.
    decided = await written(mongo, "decided", 2)
    waited = await mongo.executions.replace(decided, f.suspended("decided"))
    assert waited is not None
    assert await mongo.executions.replace(
        waited, waited.model_copy(update={"status": ExecutionStatus.RESUMING, "epoch": 3})
    )
    assert await pending_reviews_costs(mongo) == alone
    # One query over the suspended executions' markers, and the head of each by _id.
    assert alone == Counter({("suspended_executions", "find"): 1, ("executions", "find"): 1})


async def test_a_suspension_costs_one_marker_write_in_and_one_out(mongo: MongoStore) -> None:
    running = await written(mongo, "in-and-out", 2)
    with counted() as into:
        waiting = await mongo.executions.replace(running, f.suspended("in-and-out"))
    assert waiting is not None
    with counted() as out:
        assert await mongo.executions.replace(
            waiting, waiting.model_copy(update={"status": ExecutionStatus.RESUMING, "epoch": 3})
        )
    assert into[("suspended_executions", "update")] == 1
    assert out[("suspended_executions", "delete")] == 1
    assert sum(into.values()) == 3 and sum(out.values()) == 3


async def test_replicas_starting_together_mark_without_error(mongo: MongoStore) -> None:
    # Every service process runs ensure_indexes at start-up; on FerretDB two upserts of one new
    # _id at once can fail with a duplicate key, which once stopped processes from starting.
    for n in range(5):
        await mongo.executions.create(waiting_on_a_deadline(f"dl-{n}", NOW - timedelta(minutes=1)))
    for _ in range(3):
        await collection(mongo, "suspended_executions").delete_many({})
        await collection(mongo, "store_migrations").delete_many({})
        await asyncio.gather(*(mongo.executions.ensure_indexes() for _ in range(6)))
        assert await collection(mongo, "suspended_executions").count_documents({}) == 5


async def test_writers_racing_on_one_suspension_mark_it_without_error(mongo: MongoStore) -> None:
    running = await written(mongo, "raced", 2)
    waiting = waiting_on_a_deadline("raced", NOW - timedelta(minutes=1))
    stored = await asyncio.gather(*(mongo.executions.replace(running, waiting) for _ in range(6)))
    assert sum(s is not None for s in stored) == 1
    assert [e.execution_id for e in await mongo.executions.due_deadlines(NOW)] == ["raced"]


async def test_a_suspension_whose_marker_was_never_written_is_marked_again(
    mongo: MongoStore,
) -> None:
    """The marker is written while the version is: a writer that died between the two left a
    suspension no sweep or list sees, until the redelivery of what it handled marks it again."""
    running = await written(mongo, "unmarked", 2)
    waiting = waiting_on_a_deadline("unmarked", NOW - timedelta(minutes=1))
    stored = await mongo.executions.replace(running, waiting)
    assert stored is not None
    await collection(mongo, "suspended_executions").delete_many({"execution_id": "unmarked"})
    assert await mongo.executions.due_deadlines(NOW) == []
    with counted() as cost:
        await mongo.executions.mark_waiting(stored)
    assert sum(cost.values()) == 1
    assert [e.execution_id for e in await mongo.executions.due_deadlines(NOW)] == ["unmarked"]
    page = await mongo.executions.list("proj-1", "ws-1", status=ExecutionStatus.SUSPENDED)
    assert [e.execution_id for e in page.items] == ["unmarked"]
