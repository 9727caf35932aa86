"""Threads (shared/store/threads.py) on memory, SQLite and MongoDB (FerretDB): created once per
project, workspace and id, even by concurrent creates; read and listed only in their workspace
(another workspace's thread of the same id is another thread, and invisible); listed newest
first. The previous release's records, keyed by project and id, are adopted at start-up into
the workspace they were created in (SQLite and MongoDB)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from shared.store.ports import Store
from shared.store.sqlite import SqliteStore
from shared.store.threads import ThreadRecord, created_key, thread_key
from tests.conftest import throwaway_mongo_store

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
    assert await store.threads.get("p-1", "w-1", "t-1") == created
    assert await store.threads.get("p-1", "w-1", "t-2") is None


async def test_creating_again_in_the_workspace_returns_the_first_thread(store: Store) -> None:
    first = thread(metadata={"v": 1})
    await store.threads.create(first)
    again = thread(at=T0 + timedelta(hours=1), metadata={"v": 2})
    assert await store.threads.create(again) == (first, False)
    assert await store.threads.create(first) == (first, False)
    assert await store.threads.get("p-1", "w-1", "t-1") == first


async def test_workspaces_do_not_share_threads(store: Store) -> None:
    """The same id in two workspaces is two threads: each created (no squatting of an id across
    workspaces), each read, fetched and listed only in its own."""
    mine = thread(metadata={"owner": "w-1"})
    theirs = thread(workspace_id="w-2", at=T0 + timedelta(hours=1), metadata={"owner": "w-2"})
    assert await store.threads.create(mine) == (mine, True)
    assert await store.threads.create(theirs) == (theirs, True)
    assert await store.threads.create(mine) == (mine, False)
    assert await store.threads.create(theirs) == (theirs, False)
    assert await store.threads.get("p-1", "w-1", "t-1") == mine
    assert await store.threads.get("p-1", "w-2", "t-1") == theirs
    await store.threads.create(thread("t-only-mine"))
    assert await store.threads.get("p-1", "w-2", "t-only-mine") is None
    assert await store.threads.get("p-1", "w-3", "t-1") is None
    assert await store.threads.get_many("p-1", "w-2", ["t-only-mine", "t-1"]) == {"t-1": theirs}
    assert await store.threads.get_many("p-1", "w-3", ["t-only-mine", "t-1"]) == {}
    assert await store.threads.list("p-1", "w-2", limit=10) == [theirs]


async def test_of_concurrent_creates_in_two_workspaces_one_creates_in_each(store: Store) -> None:
    attempts = [thread("t-race", workspace_id=f"w-{n % 2}", metadata={"n": n}) for n in range(10)]
    results = await asyncio.gather(*(store.threads.create(t) for t in attempts))
    assert sorted(created for _, created in results) == [False] * 8 + [True] * 2
    for workspace in ("w-0", "w-1"):
        winner = next(t for t, created in results if created and t.workspace_id == workspace)
        assert all(t == winner for t, _ in results if t.workspace_id == workspace)
        assert await store.threads.get("p-1", workspace, "t-race") == winner


async def test_of_concurrent_creates_exactly_one_creates(store: Store) -> None:
    attempts = [thread("t-race", metadata={"n": n}) for n in range(10)]
    results = await asyncio.gather(*(store.threads.create(t) for t in attempts))
    assert sorted(created for _, created in results) == [False] * 9 + [True]
    winner = next(t for t, created in results if created)
    assert all(t == winner for t, _ in results)
    assert await store.threads.get("p-1", "w-1", "t-race") == winner


async def test_projects_do_not_share_threads(store: Store) -> None:
    mine = thread(metadata={"owner": "p-1"})
    theirs = thread(project_id="p-2", metadata={"owner": "p-2"})
    assert await store.threads.create(mine) == (mine, True)
    assert await store.threads.create(theirs) == (theirs, True)  # same id, other project
    assert await store.threads.get("p-1", "w-1", "t-1") == mine
    assert await store.threads.get("p-2", "w-1", "t-1") == theirs
    await store.threads.create(thread("t-only-mine"))
    assert await store.threads.get("p-2", "w-1", "t-only-mine") is None
    assert await store.threads.get_many("p-2", "w-1", ["t-only-mine"]) == {}
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


async def test_get_many_returns_the_workspaces_threads_found_by_id(store: Store) -> None:
    one, two = thread("t-1"), thread("t-2")
    await store.threads.create(one)
    await store.threads.create(two)
    await store.threads.create(thread("t-3"))
    await store.threads.create(thread("t-4", workspace_id="w-2"))
    await store.threads.create(thread("t-1", project_id="p-2"))
    assert await store.threads.get_many(
        "p-1", "w-1", ["t-2", "t-missing", "t-1", "t-1", "t-4"]
    ) == {
        "t-1": one,
        "t-2": two,
    }
    assert await store.threads.get_many("p-1", "w-1", []) == {}


async def test_metadata_keys_are_the_callers_whatever_they_hold(store: Store) -> None:
    """Keys MongoDB-compatible servers refuse in documents ("." and a leading "$") round-trip."""
    metadata = {"a.b": 1, "$x": {"$y.z": [1, {"c.d": "e"}]}, "": None, "ü": "ß"}
    created = thread("t-odd/id with spaces", metadata=metadata)
    assert await store.threads.create(created) == (created, True)
    got = await store.threads.get("p-1", "w-1", "t-odd/id with spaces")
    assert got is not None and got.metadata == metadata
    assert await store.threads.list("p-1", "w-1", limit=1) == [created]
    assert await store.threads.get_many("p-1", "w-1", ["t-odd/id with spaces"]) == {
        "t-odd/id with spaces": created
    }
    # A thread id holding "/" is that thread's, never another workspace's.
    assert await store.threads.get("p-1", "t-odd", "id with spaces") is None


def test_a_key_names_project_workspace_and_thread_unambiguously() -> None:
    assert thread_key("p-1", "w-1", "t/1") == "p-1/w-1/t/1"
    for project, workspace in (("p/1", "w-1"), ("p-1", "w/1")):
        with pytest.raises(ValueError):
            thread_key(project, workspace, "t-1")


# --- the previous release's records, keyed by (project, thread) ---------------------------------

LEGACY = [
    thread("t-old", metadata={"case": "CLM-1"}),
    thread("t-other", workspace_id="w-2", at=T0 + timedelta(seconds=1)),
]


async def test_sqlite_adopts_the_previous_releases_threads_in_their_workspace(
    tmp_path: Path,
) -> None:
    path = tmp_path / "interlock.db"
    with sqlite3.connect(path) as old:
        old.executescript(PREVIOUS_SQLITE_SCHEMA)
        old.executemany(
            "INSERT INTO threads (project_id, thread_id, workspace_id, created_key, body)"
            " VALUES (?, ?, ?, ?, ?)",
            [
                (t.project_id, t.thread_id, t.workspace_id, created_key(t), t.model_dump_json())
                for t in LEGACY
            ],
        )
    for _ in range(2):  # every start runs it; the second finds nothing to move
        store = await SqliteStore.open(path)
        try:
            await assert_adopted(store)
        finally:
            await store.close()


@pytest.mark.integration
async def test_mongo_adopts_the_previous_releases_threads_in_their_workspace(
    mongodb_uri: str,
) -> None:
    async with throwaway_mongo_store(mongodb_uri, "threads") as store:
        collection = store.database["threads"]
        await collection.insert_many(
            [
                {
                    "_id": f"{t.project_id}/{t.thread_id}",
                    "schema_version": 1,
                    "project_id": t.project_id,
                    "workspace_id": t.workspace_id,
                    "thread_id": t.thread_id,
                    "created_key": created_key(t),
                    "body": t.model_dump_json(),
                }
                for t in LEGACY
            ]
        )
        assert await store.threads.adopt_previous() == 2
        await assert_adopted(store)
        # Every start runs it; once adopted, nothing matches. A record the previous release
        # writes meanwhile (a rolling upgrade) is adopted by the next start.
        assert await store.threads.adopt_previous() == 0
        late = thread("t-late", at=T0 + timedelta(seconds=2))
        await collection.insert_one(
            {
                "_id": "p-1/t-late",
                "schema_version": 1,
                "project_id": "p-1",
                "workspace_id": "w-1",
                "thread_id": "t-late",
                "created_key": created_key(late),
                "body": late.model_dump_json(),
            }
        )
        await store.ensure_indexes()
        assert await store.threads.get("p-1", "w-1", "t-late") == late
        assert await store.threads.list("p-1", "w-1", limit=10) == [late, LEGACY[0]]
        # The originals stay for the previous release's gateways, which read them by their key.
        kept = await collection.find_one({"_id": "p-1/t-old"})
        assert kept is not None and kept["adopted"] is True


async def assert_adopted(store: Store) -> None:
    """Each record reads in the workspace it was created in, and is listed there once; another
    workspace may create the same id as a thread of its own."""
    old, other = LEGACY
    assert await store.threads.get("p-1", "w-1", "t-old") == old
    assert await store.threads.get("p-1", "w-2", "t-old") is None
    assert await store.threads.get("p-1", "w-2", "t-other") == other
    assert await store.threads.get_many("p-1", "w-1", ["t-old", "t-other"]) == {"t-old": old}
    assert await store.threads.list("p-1", "w-1", limit=10) == [old]
    assert await store.threads.list("p-1", "w-2", limit=10) == [other]
    assert await store.threads.create(old) == (old, False)


PREVIOUS_SQLITE_SCHEMA = """
CREATE TABLE threads (
    project_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_key TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (project_id, thread_id)
);
CREATE INDEX threads_by_workspace ON threads (project_id, workspace_id, created_key, thread_id);
"""
"""The previous release's table, as it created it."""
