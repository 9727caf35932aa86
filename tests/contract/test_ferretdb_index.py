"""A `find` by `_id` is answered from the unique `_id` index, and an equality on an indexed field
from an index, proved with the server's `explain`.

Stock FerretDB 1.24 scans the collection for it on both backends (the pushed-down SQL is not the
indexed expression), so every point read costs more as history grows; `infra/infra.sh` builds
FerretDB with `infra/ferretdb/0001-id-lookups-use-the-index.patch`, which this test pins. On
PostgreSQL it also pins `0002-equality-on-indexed-fields-uses-an-index.patch`: an equality on an
indexed field is pushed down as a containment (`@>`), which only the GIN index the patch adds
can serve. FerretDB
returns the backend's own query plan: PostgreSQL's `EXPLAIN (FORMAT JSON)` or SQLite's
`EXPLAIN QUERY PLAN` rows. MongoDB always reads `_id` through its index (there the test skips).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from shared.store.memories import Tenant, new_item, prefix_path
from tests.conftest import throwaway_mongo_store, unique_name

pytestmark = pytest.mark.integration

Doc = dict[str, Any]
# Enough rows that a sequential scan costs clearly more than an index lookup: PostgreSQL picks
# plans by cost, and scans a table of a page or two whatever the indexes.
DOCUMENTS = 2000
OBJECT_ID = ObjectId("6256c5ba0badc0ffeeffffff")


@pytest.fixture
async def collection(mongodb_uri: str) -> AsyncIterator[AsyncCollection[Doc]]:
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongodb_uri, serverSelectionTimeoutMS=10000)
    build = await client.admin.command("buildInfo")
    if "ferretdbVersion" not in build:
        await client.close()
        pytest.skip(
            f"not FerretDB (MongoDB {build.get('version')}): MongoDB reads `_id` by its index"
        )
    name = unique_name("idindex")
    coll = client[name]["docs"]
    try:
        docs: list[Doc] = [
            {"_id": f"exec-{i:06d}", "n": i, "pad": "x" * 80} for i in range(DOCUMENTS)
        ]
        docs += [{"_id": OBJECT_ID, "n": -1}, {"_id": 42, "n": -2}]
        await coll.insert_many(docs)
        yield coll
    finally:
        await client.drop_database(name)
        await client.close()


async def explain(coll: AsyncCollection[Doc], filter_: Doc) -> Doc:
    result: Doc = await coll.database.command("explain", {"find": coll.name, "filter": filter_})
    return result


def backend(plan: Doc) -> str:
    """Which backend produced the plan: PostgreSQL's is a JSON tree, SQLite's a list of rows."""
    inner = plan["queryPlanner"].get("Plan")
    if isinstance(inner, dict) and "Node Type" in inner:
        return "postgresql"
    if isinstance(inner, list):
        return "sqlite"
    raise AssertionError(f"unknown FerretDB query plan: {plan['queryPlanner']!r}")


def postgres_nodes(node: Doc) -> list[Doc]:
    return [node, *(n for child in node.get("Plans", []) for n in postgres_nodes(child))]


def assert_uses_id_index(plan: Doc) -> None:
    assert plan.get("filterPushdown") is True, plan
    if backend(plan) == "postgresql":
        nodes = postgres_nodes(plan["queryPlanner"]["Plan"])
        kinds = [n["Node Type"] for n in nodes]
        assert "Seq Scan" not in kinds, plan["queryPlanner"]
        assert any(
            "Index" in n["Node Type"] and "_jsonb -> '_id'" in n.get("Index Cond", "")
            for n in nodes
        ), plan["queryPlanner"]
    else:
        rows: list[str] = plan["queryPlanner"]["Plan"]
        assert not any(" SCAN " in f" {r.split('detail=', 1)[-1]} " for r in rows), rows
        assert any("USING INDEX" in r and "__id_" in r for r in rows), rows


@pytest.mark.parametrize(
    ("filter_", "n"),
    [
        ({"_id": "exec-001234"}, 1234),
        ({"_id": OBJECT_ID}, -1),
    ],
    ids=["string", "objectid"],
)
async def test_a_find_by_id_uses_the_id_index(
    collection: AsyncCollection[Doc], filter_: Doc, n: int
) -> None:
    assert_uses_id_index(await explain(collection, filter_))
    assert [d["n"] async for d in collection.find(filter_)] == [n]


async def test_a_find_by_a_numeric_id_uses_the_id_index_on_postgresql(
    collection: AsyncCollection[Doc],
) -> None:
    plan = await explain(collection, {"_id": 42})
    if backend(plan) == "sqlite":
        pytest.skip("FerretDB's SQLite backend pushes down only string and ObjectId `_id`s")
    assert_uses_id_index(plan)
    # Numbers equal in MongoDB are one `_id`: 42, 42.0 and NumberLong(42) find the same document.
    for value in (42, 42.0):
        assert [d["n"] async for d in collection.find({"_id": value})] == [-2]


async def test_the_id_index_serves_a_filter_with_more_fields_on_postgresql(
    collection: AsyncCollection[Doc],
) -> None:
    filter_ = {"_id": "exec-000007", "n": 7}
    plan = await explain(collection, filter_)
    if backend(plan) == "sqlite":
        pytest.skip("FerretDB's SQLite backend pushes down only a filter that is `_id` alone")
    assert_uses_id_index(plan)
    assert [d["n"] async for d in collection.find(filter_)] == [7]
    assert [d async for d in collection.find({"_id": "exec-000007", "n": 8})] == []


@pytest.fixture
async def statuses(mongodb_uri: str) -> AsyncIterator[AsyncCollection[Doc]]:
    """Executions-like documents: many ended, a few live, one whose status is an array."""
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongodb_uri, serverSelectionTimeoutMS=10000)
    build = await client.admin.command("buildInfo")
    if "ferretdbVersion" not in build:
        await client.close()
        pytest.skip(f"not FerretDB (MongoDB {build.get('version')}): MongoDB uses its indexes")
    name = unique_name("eqindex")
    coll = client[name]["heads"]
    try:
        await coll.create_index([("status", 1), ("deadline_key", 1)], name="by_status_deadline")
        docs: list[Doc] = [
            {"_id": f"exec-{i:06d}", "status": "completed" if i % 100 else "suspended"}
            for i in range(DOCUMENTS)
        ]
        docs.append({"_id": "listed", "status": ["suspended", "flagged"]})
        await coll.insert_many(docs)
        yield coll
    finally:
        await client.drop_database(name)
        await client.close()


def equality_index_scans(plan: Doc, field: str) -> list[Doc]:
    nodes = postgres_nodes(plan["queryPlanner"]["Plan"])
    assert "Seq Scan" not in [n["Node Type"] for n in nodes], plan["queryPlanner"]
    return [
        n
        for n in nodes
        if "Index" in n["Node Type"] and f"_jsonb -> '{field}'" in n.get("Index Cond", "")
    ]


async def test_an_equality_on_an_indexed_field_uses_an_index_on_postgresql(
    statuses: AsyncCollection[Doc],
) -> None:
    plan = await explain(statuses, {"status": "suspended"})
    if backend(plan) == "sqlite":
        pytest.skip("FerretDB's SQLite backend pushes down only a filter that is `_id` alone")
    assert plan.get("filterPushdown") is True, plan
    scans = equality_index_scans(plan, "status")
    assert [n["Index Name"].endswith("_gin") for n in scans] == [True], plan["queryPlanner"]
    # MongoDB's semantics are kept: the equality also matches an array that holds the value.
    found = {d["_id"] async for d in statuses.find({"status": "suspended"})}
    assert found == {f"exec-{i:06d}" for i in range(0, DOCUMENTS, 100)} | {"listed"}
    assert await statuses.count_documents({"status": "suspended"}) == len(found)
    assert await statuses.count_documents({"status": "flagged"}) == 1


async def test_the_equality_index_goes_with_its_index_on_postgresql(
    statuses: AsyncCollection[Doc],
) -> None:
    if backend(await explain(statuses, {"status": "suspended"})) == "sqlite":
        pytest.skip("the equality index is a PostgreSQL backend patch")
    # Another index leading with the same field keeps the field served when the first goes.
    await statuses.create_index([("status", 1), ("_id", 1)], name="by_status_id")
    await statuses.drop_index("by_status_deadline")
    assert equality_index_scans(await explain(statuses, {"status": "suspended"}), "status")
    await statuses.drop_index("by_status_id")
    nodes = postgres_nodes(
        (await explain(statuses, {"status": "suspended"}))["queryPlanner"]["Plan"]
    )
    assert "Seq Scan" in [n["Node Type"] for n in nodes]
    assert await statuses.count_documents({"status": "suspended"}) == DOCUMENTS // 100 + 1


async def test_a_memory_search_reads_the_prefix_through_an_index_on_postgresql(
    mongodb_uri: str,
) -> None:
    """Agents' memory (shared/store/mongo/memories.py): a search by namespace prefix is one
    equality on the multikey ``paths``, the leading field of its index, served by the GIN
    companion (no scan of every tenant's items)."""
    async with throwaway_mongo_store(mongodb_uri, "memindex") as store:
        now = datetime.now(UTC)
        for n in range(DOCUMENTS // 4):
            tenant = Tenant("p", f"w-{n % 50}")
            await store.memories.put(
                new_item(tenant, ("users", f"u-{n}"), "k", {"n": n}, ttl_minutes=None, now=now)
            )
        collection = store.database["agent_memories"]
        wanted = prefix_path(Tenant("p", "w-7"), ("users",))
        plan = await explain(collection, {"paths": wanted})
        if backend(plan) == "sqlite":
            pytest.skip("FerretDB's SQLite backend pushes down only a filter that is `_id` alone")
        scans = equality_index_scans(plan, "paths")
        assert [n["Index Name"].endswith("_gin") for n in scans] == [True], plan["queryPlanner"]
        found = [
            i async for i in store.memories.search(Tenant("p", "w-7"), ("users",), at_most=None)
        ]
        assert len(found) == DOCUMENTS // 4 // 50
