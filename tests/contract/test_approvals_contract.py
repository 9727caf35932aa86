"""Approvals toward multi-owner decisions (shared/store/approvals.py) on memory, SQLite and
MongoDB (FerretDB): one per identity and generation, whatever channel it came through."""

from __future__ import annotations

import asyncio

from shared.store.approvals import Approval
from shared.store.ports import Store


def approval(reviewer: str, identity: str | None, generation: int = 1, **extra: object) -> Approval:
    return Approval(
        execution_id="exec-1",
        generation=generation,
        reviewer=reviewer,
        identity=identity,
        answer_key="k",
        summary="approve",
        **extra,  # type: ignore[arg-type]
    )


async def test_one_identity_is_one_approval_whatever_the_channel(store: Store) -> None:
    by_key = approval("key:a1 (alice)", "person:alice@example.com", key_id="a1")
    by_link = approval("link:mail for alice@example.com", "person:alice@example.com", via_link=True)
    assert await store.approvals.record(by_key) == by_key
    assert await store.approvals.record(by_link) == by_key  # the first stands
    bob = approval("key:b1 (bob)", "key:b1", key_id="b1")
    await store.approvals.record(bob)
    await store.approvals.record(approval("key:b1 (bob)", "key:b1", generation=2))
    listed = await store.approvals.list("exec-1", 1)
    assert [(a.reviewer, a.key_id, a.via_link) for a in listed] == [
        ("key:a1 (alice)", "a1", False),
        ("key:b1 (bob)", "b1", False),
    ]
    assert [a.generation for a in await store.approvals.list("exec-1", 2)] == [2]


async def test_concurrent_approvals_of_one_identity_store_one(store: Store) -> None:
    attempts = [approval(f"link:c{n} for carol", "person:carol@example.com") for n in range(6)]
    stored = await asyncio.gather(*(store.approvals.record(a) for a in attempts))
    assert len({a.reviewer for a in stored}) == 1
    assert len(await store.approvals.list("exec-1", 1)) == 1


async def test_approvals_without_an_identity_count_by_reviewer(store: Store) -> None:
    """Approvals stored before identities were recorded read back, counted by reviewer."""
    old = approval("key:a1 (alice)", None)
    await store.approvals.record(old)
    assert (await store.approvals.list("exec-1", 1))[0].counted_as == "key:a1 (alice)"


async def test_each_generation_lists_its_own_approvals_only(store: Store) -> None:
    """Other generations, and executions whose id starts with this one's, never mix in."""
    mine = [approval(f"key:{n}", f"key:{n}") for n in range(5)]
    for a in mine:
        await store.approvals.record(a)
    await store.approvals.record(approval("key:9", "key:9", generation=2))
    await store.approvals.record(
        approval("key:8", "key:8").model_copy(update={"execution_id": "exec-10"})
    )
    await store.approvals.record(
        approval("key:7", "key:7").model_copy(update={"execution_id": "exec"})
    )
    assert await store.approvals.list("exec-1", 1) == mine
    assert [a.reviewer for a in await store.approvals.list("exec-1", 2)] == ["key:9"]
    assert [a.reviewer for a in await store.approvals.list("exec-10", 1)] == ["key:8"]
    assert await store.approvals.list("exec-1", 3) == []


async def test_concurrent_approvals_of_many_identities_are_all_listed(store: Store) -> None:
    given = [approval(f"key:{n}", f"key:{n}") for n in range(8)]
    await asyncio.gather(*(store.approvals.record(a) for a in given))
    assert sorted(a.reviewer for a in await store.approvals.list("exec-1", 1)) == sorted(
        a.reviewer for a in given
    )
