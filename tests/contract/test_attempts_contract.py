"""The attempt ledger, on every store: attempts of an epoch are numbered 1, 2, 3... and never
share a number, even when replicas begin at once; a later attempt supersedes the earlier ones;
each epoch counts from 1."""

from __future__ import annotations

import asyncio

from shared.store.ports import Store


async def test_attempts_are_numbered_in_order_per_epoch(store: Store) -> None:
    assert [await store.attempts.begin("exec-a", 0) for _ in range(3)] == [1, 2, 3]
    assert await store.attempts.begin("exec-a", 1) == 1
    assert await store.attempts.begin("exec-b", 0) == 1
    assert await store.attempts.is_superseded("exec-a", 0, 2)
    assert not await store.attempts.is_superseded("exec-a", 0, 3)
    assert not await store.attempts.is_superseded("exec-a", 1, 1)


async def test_replicas_beginning_at_once_get_distinct_numbers(store: Store) -> None:
    numbers = await asyncio.gather(*(store.attempts.begin("exec-race", 2) for _ in range(8)))
    assert sorted(numbers) == list(range(1, 9))
