"""Many updates at once never wedge the store. Stock FerretDB 1.24 holds a pool connection for
an update's query while the write takes a second one, so as many updates at once as its pool has
connections (50 on PostgreSQL) wait for each other forever; `infra/infra.sh` builds it with
`infra/ferretdb/0003-updates-close-their-query-before-writing.patch`, which this test pins.
Interlock's consumers run that many at once (issue 19). On MongoDB it simply passes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo import AsyncMongoClient, ReturnDocument

from tests.conftest import unique_name

pytestmark = pytest.mark.integration

AT_ONCE = 200
"""Well above FerretDB's pool of 50 connections to PostgreSQL."""
DOCUMENTS = 2000
"""Enough that each update's query holds its connection a while (FerretDB filters `$in` itself,
reading every document), as a loaded store does: the updates then overlap."""
STALL_SECONDS = 20
"""How long the updates may go without one of them finishing. The wedge this pins never ends,
so it is told from slowness by progress, not by a deadline on the whole batch: on a loaded
machine (CI's two cores shared with other test workers) the batch alone took over 30 s."""


async def test_many_updates_and_upserts_at_once_all_finish(mongodb_uri: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, maxPoolSize=AT_ONCE, serverSelectionTimeoutMS=10_000
    )
    name = unique_name("updates")
    coll = client[name]["docs"]
    try:
        await coll.insert_many([{"_id": f"doc-{i}", "k": i, "n": 0} for i in range(DOCUMENTS)])

        finished = 0

        async def touch(i: int) -> None:
            nonlocal finished
            await coll.update_one({"k": {"$in": [i]}}, {"$set": {"n": 1}})
            finished += 1
            await coll.update_one({"slot": i}, {"$set": {"n": 1}}, upsert=True)
            finished += 1
            await coll.find_one_and_update(
                {"k": {"$in": [i]}}, {"$set": {"n": 2}}, return_document=ReturnDocument.AFTER
            )
            finished += 1
            await coll.find_one_and_delete({"slot": {"$in": [i]}})
            finished += 1

        batch = asyncio.gather(*(touch(i) for i in range(AT_ONCE)))
        while not batch.done():
            seen = finished
            await asyncio.wait({batch}, timeout=STALL_SECONDS)
            if not batch.done() and finished == seen:
                batch.cancel()
                pytest.fail(f"no update finished in {STALL_SECONDS} s: {finished} of {4 * AT_ONCE}")
        await batch
        assert await coll.count_documents({"n": 2}) == AT_ONCE
        assert await coll.count_documents({}) == DOCUMENTS  # every upserted one deleted again
    finally:
        await client.drop_database(name)
        await client.close()
