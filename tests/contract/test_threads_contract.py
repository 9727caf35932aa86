"""Threads (shared/store/threads.py) on memory, SQLite and MongoDB (FerretDB): created once per
project and id, even by concurrent creates; listed newest first, per workspace."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shared.store.ports import Store
from shared.store.threads import ThreadRecord

T0 = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


def thread(
    thread_id: str = "t-1",
    *,
    project_id: str = "p-1",
    workspace_id: str = "w-1",
    at: datetime = T0,
    metadata: dict[str, Any] | None = None,
) -> ThreadRecord:
    return ThreadRecord(
        project_id=project_id,
        workspace_id=workspace_id,
        thread_id=thread_id,
        created_at=at,
        metadata=metadata or {},
    )


async def test_a_created_thread_reads_back(store: Store) -> None:
    created = thread(metadata={"graph_id": "review", "n": 3, "tags": ["a", None]})
    assert await store.threads.create(created) == (created, True)
    assert await store.threads.get("p-1", "t-1") == created
    assert await store.threads.get("p-1", "t-2") is None


async def test_creating_again_returns_the_first_thread(store: Store) -> None:
    first = thread(metadata={"v": 1})
    await store.threads.create(first)
    again = thread(workspace_id="w-2", at=T0 + timedelta(hours=1), metadata={"v": 2})
    assert await store.threads.create(again) == (first, False)
    assert await store.threads.create(first) == (first, False)
    assert await store.threads.get("p-1", "t-1") == first


async def test_of_concurrent_creates_exactly_one_creates(store: Store) -> None:
    attempts = [thread("t-race", metadata={"n": n}) for n in range(10)]
    results = await asyncio.gather(*(store.threads.create(t) for t in attempts))
    assert sorted(created for _, created in results) == [False] * 9 + [True]
    winner = next(t for t, created in results if created)
    assert all(t == winner for t, _ in results)
    assert await store.threads.get("p-1", "t-race") == winner


async def test_projects_do_not_share_threads(store: Store) -> None:
    mine = thread(metadata={"owner": "p-1"})
    theirs = thread(project_id="p-2", metadata={"owner": "p-2"})
    assert await store.threads.create(mine) == (mine, True)
    assert await store.threads.create(theirs) == (theirs, True)  # same id, other project
    assert await store.threads.get("p-1", "t-1") == mine
    assert await store.threads.get("p-2", "t-1") == theirs
    await store.threads.create(thread("t-only-mine"))
    assert await store.threads.get("p-2", "t-only-mine") is None
    assert await store.threads.get_many("p-2", ["t-only-mine"]) == {}
    assert [t.thread_id for t in await store.threads.list("p-2", "w-1", limit=10)] == ["t-1"]


async def test_a_workspace_lists_newest_first_a_page_at_a_time(store: Store) -> None:
    # t-b and t-c share a creation time: the greater id comes first.
    stored = [
        thread("t-a", at=T0),
        thread("t-b", at=T0 + timedelta(seconds=1)),
        thread("t-c", at=T0 + timedelta(seconds=1)),
        thread("t-d", at=T0 + timedelta(microseconds=1_000_001)),
        thread("t-e", at=T0 + timedelta(minutes=1)),
        thread("t-other-workspace", workspace_id="w-2", at=T0 + timedelta(hours=1)),
    ]
    for t in reversed(stored):
        await store.threads.create(t)

    async def ids(limit: int, offset: int = 0) -> list[str]:
        listed = await store.threads.list("p-1", "w-1", limit=limit, offset=offset)
        return [t.thread_id for t in listed]

    assert await ids(10) == ["t-e", "t-d", "t-c", "t-b", "t-a"]
    assert await ids(2) == ["t-e", "t-d"]
    assert await ids(2, offset=2) == ["t-c", "t-b"]
    assert await ids(2, offset=4) == ["t-a"]
    assert await ids(2, offset=5) == []
    assert await ids(0) == []
    assert await store.threads.list("p-1", "w-1", limit=1) == [stored[4]]
    assert await store.threads.list("p-1", "w-2", limit=10) == [stored[5]]
    assert await store.threads.list("p-1", "w-3", limit=10) == []


async def test_creation_times_sort_as_times_whatever_their_offset(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    # 04:30+02:00 is 02:30 UTC: earlier than 03:00 UTC, though its text is greater.
    early = thread("t-early", at=datetime(2025, 1, 1, 4, 30, tzinfo=plus_two))
    late = thread("t-late", at=datetime(2025, 1, 1, 3, 0, tzinfo=UTC))
    await store.threads.create(early)
    await store.threads.create(late)
    assert await store.threads.list("p-1", "w-1", limit=10) == [late, early]


async def test_a_negative_page_is_refused(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.threads.list("p-1", "w-1", limit=-1)
    with pytest.raises(ValueError):
        await store.threads.list("p-1", "w-1", limit=1, offset=-1)


async def test_get_many_returns_the_threads_found_by_id(store: Store) -> None:
    one, two = thread("t-1"), thread("t-2", workspace_id="w-2")
    await store.threads.create(one)
    await store.threads.create(two)
    await store.threads.create(thread("t-3"))
    await store.threads.create(thread("t-1", project_id="p-2"))
    assert await store.threads.get_many("p-1", ["t-2", "t-missing", "t-1", "t-1"]) == {
        "t-1": one,
        "t-2": two,
    }
    assert await store.threads.get_many("p-1", []) == {}


async def test_metadata_keys_are_the_callers_whatever_they_hold(store: Store) -> None:
    """Keys MongoDB-compatible servers refuse in documents ("." and a leading "$") round-trip."""
    metadata = {"a.b": 1, "$x": {"$y.z": [1, {"c.d": "e"}]}, "": None, "ü": "ß"}
    created = thread("t-odd/id with spaces", metadata=metadata)
    assert await store.threads.create(created) == (created, True)
    got = await store.threads.get("p-1", "t-odd/id with spaces")
    assert got is not None and got.metadata == metadata
    assert await store.threads.list("p-1", "w-1", limit=1) == [created]
    assert await store.threads.get_many("p-1", ["t-odd/id with spaces"]) == {
        "t-odd/id with spaces": created
    }
