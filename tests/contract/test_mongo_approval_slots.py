"""Approvals on a real MongoDB-compatible server (shared/store/mongo/approvals.py): listing a
generation reads numbered slots by ``_id`` only (FerretDB scans for any other filter, and the
approvals of every execution ever run would be scanned), approvals stored in the layout before the
slots still count, and a crash between an approval and its slot is repaired by the retry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring

from shared.store.approvals import Approval, approval_id
from shared.store.mongo import MongoStore
from tests.conftest import unique_name

pytestmark = pytest.mark.integration


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        if name in {"find", "aggregate", "count", "insert", "update", "delete"}:
            self.seen.append((name, event.command[name], event.command.get("filter")))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@dataclass
class World:
    store: MongoStore
    commands: Commands

    def collection(self, name: str) -> Any:
        return self.store.database[name]


@pytest.fixture
async def world(mongodb_uri: str) -> AsyncIterator[World]:
    commands = Commands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, event_listeners=[commands]
    )
    name = unique_name("approvals")
    store = MongoStore(client, name)
    await store.ensure_indexes()
    commands.seen.clear()
    try:
        yield World(store, commands)
    finally:
        await client.drop_database(name)
        await client.close()


def approval(execution_id: str, identity: str, generation: int = 1, **extra: Any) -> Approval:
    return Approval(
        execution_id=execution_id,
        generation=generation,
        reviewer=f"key:{identity}",
        identity=identity,
        answer_key="k",
        summary="approve",
        **extra,
    )


async def test_a_generation_is_listed_and_recorded_by_id_only(world: World) -> None:
    approvals = world.store.approvals
    for n in range(30):  # other executions' approvals: history a scan would read
        await approvals.record(approval(f"other-{n}", "person:x"))
    world.commands.seen.clear()
    await approvals.record(approval("exec-1", "person:alice"))
    await approvals.record(approval("exec-1", "person:bob"))
    recorded = list(world.commands.seen)
    world.commands.seen.clear()
    listed = await approvals.list("exec-1", 1)
    assert [a.identity for a in listed] == ["person:alice", "person:bob"]
    # Three point reads: slots 0 and 1, and the free slot 2 that ends the list.
    assert [(c, coll) for c, coll, _ in world.commands.seen] == [("find", "approval_slots")] * 3
    everything = recorded + world.commands.seen
    finds = [f for c, _, f in everything if c == "find"]
    assert all(set(f) == {"_id"} and isinstance(f["_id"], str) for f in finds), finds
    assert {c for c, _, _ in everything} <= {"find", "insert"}
    # The first approval: its insert and slot 0; the second: its insert, slot 0 taken, slot 1.
    assert [(c, coll) for c, coll, _ in recorded] == [
        ("insert", "approvals"),
        ("insert", "approval_slots"),
        ("insert", "approvals"),
        ("insert", "approval_slots"),
        ("insert", "approval_slots"),
    ]


async def test_concurrent_approvals_of_many_identities_each_get_a_slot(world: World) -> None:
    """Eight people, each approving twice at once (by key and by link): eight approvals
    listed, each the one every record of that person answered with (the first stored)."""
    given = [
        approval("exec-1", f"person:{n}", via_link=link) for link in (False, True) for n in range(8)
    ]
    answered = await asyncio.gather(*(world.store.approvals.record(a) for a in given))
    listed = await world.store.approvals.list("exec-1", 1)
    assert sorted(a.counted_as for a in listed) == sorted({a.counted_as for a in given})
    first = {a.counted_as: a for a in listed}
    assert all(first[a.counted_as] == a for a in answered)


async def test_approvals_stored_before_the_slots_still_count_once(world: World) -> None:
    """An execution suspended before the upgrade, with one approval in the old layout (no
    slot, no schema version): the start-up adopts it; the same person approving again through
    another channel still counts once."""
    old = approval("exec-1", "person:alice", key_id="a1")
    await world.collection("approvals").insert_one(
        {"_id": approval_id(old), **old.model_dump(mode="json")}
    )
    older = Approval(  # before identities were recorded
        execution_id="exec-1", generation=1, reviewer="key:b1 (bob)", answer_key="k", summary="s"
    )
    await world.collection("approvals").insert_one(
        {"_id": approval_id(older), **older.model_dump(mode="json")}
    )
    assert await world.store.approvals.list("exec-1", 1) == []  # not adopted yet

    await world.store.ensure_indexes()
    assert await world.store.approvals.list("exec-1", 1) == [old, older]
    by_link = approval("exec-1", "person:alice", via_link=True)
    assert await world.store.approvals.record(by_link) == old
    assert await world.store.approvals.list("exec-1", 1) == [old, older]

    world.commands.seen.clear()
    await world.store.ensure_indexes()  # a later start: nothing left to adopt
    assert [(c, f) for c, coll, f in world.commands.seen if coll == "approvals"] == [
        ("find", {"schema_version": {"$ne": 2}})
    ]
    assert await world.store.approvals.list("exec-1", 1) == [old, older]


async def test_an_approval_whose_slot_was_lost_counts_once_given_again(world: World) -> None:
    """The gateway died between the approval's insert and its slot's: the approval does not
    count (its request failed), and the retry gives it its slot."""
    first = approval("exec-1", "person:alice", key_id="a1")
    await world.collection("approvals").insert_one(
        {"_id": approval_id(first), "schema_version": 2, **first.model_dump(mode="json")}
    )
    assert await world.store.approvals.list("exec-1", 1) == []
    retry = approval("exec-1", "person:alice", key_id="a1")
    assert await world.store.approvals.record(retry) == first
    assert await world.store.approvals.list("exec-1", 1) == [first]
    assert await world.store.approvals.record(retry) == first
    assert await world.store.approvals.list("exec-1", 1) == [first]
    assert await world.collection("approval_slots").count_documents({}) == 1
