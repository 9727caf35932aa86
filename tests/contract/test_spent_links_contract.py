"""Spent notification links (shared/store/links.py) on memory, SQLite and MongoDB (FerretDB): a
link is spent once, even by concurrent POSTs."""

from __future__ import annotations

import asyncio

from shared.store.links import LinkUse
from shared.store.ports import Store


def use(link_id: str = "l-1") -> LinkUse:
    return LinkUse(
        link_id=link_id,
        execution_id="exec-1",
        generation=1,
        recipient="person:alice@example.com",
        decision="approve",
    )


async def test_a_link_is_spent_once(store: Store) -> None:
    assert not await store.spent_links.spent("l-1")
    assert await store.spent_links.spend(use()) is True
    assert await store.spent_links.spent("l-1")
    assert await store.spent_links.spend(use()) is False
    assert not await store.spent_links.spent("l-2")
    assert await store.spent_links.spend(use("l-2")) is True


async def test_of_concurrent_spends_exactly_one_wins(store: Store) -> None:
    results = await asyncio.gather(*(store.spent_links.spend(use("l-race")) for _ in range(8)))
    assert sorted(results) == [False] * 7 + [True]
