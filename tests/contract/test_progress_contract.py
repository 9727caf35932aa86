"""The progress log contract, on the in-memory, SQLite and MongoDB (FerretDB in CI) stores."""

from __future__ import annotations

from shared.store.ports import Store
from shared.store.progress import ProgressEntry, progress_key


def entry(epoch: int, attempt: int, seq: int, **data: object) -> ProgressEntry:
    return ProgressEntry(key=progress_key(epoch, attempt, seq), kind="update", data=dict(data))


async def test_entries_come_back_in_key_order_after_a_cursor(store: Store) -> None:
    first, second, third = entry(1, 1, 1, n=1), entry(1, 1, 2, n=2), entry(2, 1, 1, n=3)
    await store.progress.append("p", "ex-1", [third])
    await store.progress.append("p", "ex-1", [first, second])
    assert await store.progress.after("p", "ex-1", "") == [first, second, third]
    assert await store.progress.after("p", "ex-1", first.key) == [second, third]
    assert await store.progress.after("p", "ex-1", third.key) == []
    assert await store.progress.after("p", "ex-1", "", limit=2) == [first, second]


async def test_a_retried_append_stores_each_key_once(store: Store) -> None:
    first, second = entry(1, 1, 1, n=1), entry(1, 1, 2, n=2)
    await store.progress.append("p", "ex-2", [first])
    await store.progress.append("p", "ex-2", [first, second])
    assert await store.progress.after("p", "ex-2", "") == [first, second]


async def test_entries_are_scoped_by_project_and_execution(store: Store) -> None:
    mine = entry(1, 1, 1, who="mine")
    await store.progress.append("p", "ex-3", [mine])
    await store.progress.append("p", "ex-30", [entry(1, 1, 1, who="a neighbour with a prefix")])
    assert await store.progress.after("p", "ex-3", "") == [mine]
    assert await store.progress.after("other-project", "ex-3", "") == []


async def test_data_keys_no_server_accepts_round_trip(store: Store) -> None:
    odd = entry(1, 1, 1, update={"a.b": 1, "$where": [{"c.d": "e"}]})
    await store.progress.append("p", "ex-4", [odd])
    assert await store.progress.after("p", "ex-4", "") == [odd]
