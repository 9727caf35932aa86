"""The MongoDB execution store reads an execution by point reads: its head, then the versions
after it. These are the cases where the head trails the log (a writer died between its version
and its head, or lost a race to a newer writer): reads still return the newest version, and the
head never goes back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pymongo.asynchronous.collection import AsyncCollection

from shared.store.mongo import Document, MongoStore
from tests import factories as f
from tests.conftest import throwaway_mongo_store

pytestmark = pytest.mark.integration


@pytest.fixture
async def mongo(mongodb_uri: str) -> AsyncIterator[MongoStore]:
    async with throwaway_mongo_store(mongodb_uri, "reads") as store:
        yield store


async def written(store: MongoStore, execution_id: str, versions: int) -> None:
    execution, _ = await store.executions.create(f.pending(execution_id))
    for epoch in range(1, versions):
        moved = execution.model_copy(update={"epoch": epoch})
        assert await store.executions.replace(moved, expected_version=execution.version)
        execution = moved.model_copy(update={"version": execution.version + 1})


def collection(store: MongoStore, name: str) -> AsyncCollection[Document]:
    return store._client[store._database_name][name]


async def test_a_head_left_behind_by_a_dead_writer_is_read_past(mongo: MongoStore) -> None:
    await written(mongo, "exec-a", 3)
    # The writer of version 3 died before its head: the head still shows version 2.
    v2 = await collection(mongo, "execution_versions").find_one({"_id": "exec-a:000000000002"})
    assert v2 is not None
    await collection(mongo, "executions").replace_one(
        {"_id": "exec-a"}, {k: v for k, v in v2.items() if k != "_id"}
    )
    latest = await mongo.executions.get("proj-1", "exec-a")
    assert latest is not None and latest.version == 3 and latest.epoch == 2


async def test_an_execution_whose_head_was_never_written_is_read_from_its_log(
    mongo: MongoStore,
) -> None:
    await written(mongo, "exec-b", 2)
    await collection(mongo, "executions").delete_one({"_id": "exec-b"})
    latest = await mongo.executions.get("proj-1", "exec-b")
    assert latest is not None and latest.version == 2


async def test_the_head_never_goes_back(mongo: MongoStore) -> None:
    await written(mongo, "exec-c", 3)
    v1 = await collection(mongo, "execution_versions").find_one({"_id": "exec-c:000000000001"})
    assert v1 is not None
    # A slow writer of version 1 refreshing its head after version 3's writer did.
    await mongo.executions._refresh_head(v1)
    head = await collection(mongo, "executions").find_one({"_id": "exec-c"})
    assert head is not None and head["version"] == 3


async def test_old_versions_are_pruned_by_id_but_the_first(mongo: MongoStore) -> None:
    await written(mongo, "exec-d", 7)
    kept = await collection(mongo, "execution_versions").distinct(
        "version", {"execution_id": "exec-d"}
    )
    assert sorted(kept) == [1, 5, 6, 7]
