"""Agents' memory (shared/store/memories.py) on memory, SQLite and MongoDB (FerretDB): an item
reads back as put, keeps its creation time when replaced, is gone once deleted; a search finds
the items under a prefix label by label, latest update first, filtered and paged; namespaces are
listed by prefix, suffix and depth; expired items are never returned nor listed and the sweep
deletes them; a refreshing read moves an expiry; and no tenant sees another's items. The rules
are LangGraph's: the same operations on its ``InMemoryStore`` give the same answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore as LangGraphMemoryStore

from shared.store.memories import (
    InvalidMemory,
    MemoryItem,
    Tenant,
    get_item,
    namespaces_of,
    new_item,
    search_items,
)
from shared.store.ports import Store

T0 = datetime(2026, 3, 4, 5, 6, 7, 123000, tzinfo=UTC)
MINE = Tenant("p-1", "w-1")
THEIRS = Tenant("p-1", "w-2")


def item(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    *,
    at: datetime = T0,
    tenant: Tenant = MINE,
    ttl: float | None = None,
) -> MemoryItem:
    return new_item(tenant, namespace, key, value, ttl_minutes=ttl, now=at)


async def put_all(store: Store, items: list[MemoryItem]) -> None:
    for one in items:
        await store.memories.put(one)


async def test_an_item_reads_back_as_put_and_a_replacement_keeps_its_creation(store: Store) -> None:
    first = item(("users", "u-1"), "prefs", {"theme": "dark", "n": 3, "tags": ["a", None]})
    await store.memories.put(first)
    assert await get_item(store.memories, MINE, ("users", "u-1"), "prefs", now=T0) == first
    assert await get_item(store.memories, MINE, ("users", "u-1"), "other", now=T0) is None
    later = T0 + timedelta(minutes=5)
    await store.memories.put(item(("users", "u-1"), "prefs", {"theme": "light"}, at=later))
    replaced = await get_item(store.memories, MINE, ("users", "u-1"), "prefs", now=later)
    assert replaced is not None
    assert (replaced.value, replaced.created_at, replaced.updated_at) == (
        {"theme": "light"},
        T0,
        later,
    )
    await store.memories.delete(MINE, ("users", "u-1"), "prefs")
    assert await get_item(store.memories, MINE, ("users", "u-1"), "prefs", now=later) is None
    await store.memories.delete(MINE, ("users", "u-1"), "prefs")  # deleting again is no error


async def test_keys_and_labels_of_any_text_are_items_of_their_own(store: Store) -> None:
    """A label may hold ``/`` and a key anything: ("a/b",) "c" and ("a",) "b/c" are two items."""
    await store.memories.put(item(("a/b",), "c", {"which": 1}))
    await store.memories.put(item(("a",), "b/c", {"which": 2}))
    await store.memories.put(item(("ünï", "$x"), "k.e.y", {"a.b": {"$c": 1}}))
    one = await get_item(store.memories, MINE, ("a/b",), "c", now=T0)
    two = await get_item(store.memories, MINE, ("a",), "b/c", now=T0)
    odd = await get_item(store.memories, MINE, ("ünï", "$x"), "k.e.y", now=T0)
    assert (one and one.value, two and two.value) == ({"which": 1}, {"which": 2})
    assert odd is not None and odd.value == {"a.b": {"$c": 1}}


async def test_tenants_never_see_each_others_items(store: Store) -> None:
    await store.memories.put(item(("facts",), "k", {"owner": "mine"}))
    await store.memories.put(item(("facts",), "k", {"owner": "theirs"}, tenant=THEIRS))
    mine = await get_item(store.memories, MINE, ("facts",), "k", now=T0)
    theirs = await get_item(store.memories, THEIRS, ("facts",), "k", now=T0)
    assert mine is not None and mine.value == {"owner": "mine"}
    assert theirs is not None and theirs.value == {"owner": "theirs"}
    assert [i.value for i in await search_items(store.memories, MINE, (), now=T0)] == [
        {"owner": "mine"}
    ]
    await store.memories.delete(THEIRS, ("facts",), "k")
    assert await get_item(store.memories, MINE, ("facts",), "k", now=T0) == mine
    other_project = Tenant("p-2", "w-1")
    assert await search_items(store.memories, other_project, (), now=T0) == []
    assert await namespaces_of(store.memories, other_project, now=T0) == []


async def test_a_search_finds_a_prefix_label_by_label_latest_update_first(store: Store) -> None:
    await put_all(
        store,
        [
            item(("a",), "1", {"n": 1}, at=T0),
            item(("a", "b"), "2", {"n": 2}, at=T0 + timedelta(seconds=1)),
            item(("ab",), "3", {"n": 3}, at=T0 + timedelta(seconds=2)),
            item(("a", "b", "c"), "4", {"n": 4}, at=T0 + timedelta(seconds=3)),
        ],
    )
    now = T0 + timedelta(minutes=1)

    async def found(prefix: tuple[str, ...], **kwargs: Any) -> list[int]:
        items = await search_items(store.memories, MINE, prefix, now=now, **kwargs)
        return [i.value["n"] for i in items]

    assert await found(("a",)) == [4, 2, 1]
    assert await found(("a", "b")) == [4, 2]
    assert await found(("ab",)) == [3]
    assert await found(()) == [4, 3, 2, 1]
    assert await found(("a",), limit=2) == [4, 2]
    assert await found(("a",), limit=2, offset=1) == [2, 1]
    assert await found(("a",), offset=3) == []
    assert await found(("a",), filter={"n": {"$gte": 2}}) == [4, 2]
    assert await found((), filter={"n": {"$ne": 3}}, limit=1, offset=1) == [2]


async def test_items_of_the_same_millisecond_come_in_one_order_everywhere(store: Store) -> None:
    keys = ["b", "a", "c/d", "c"]
    await put_all(store, [item(("x",), k, {"k": k}) for k in keys])
    listed = [i.key for i in await search_items(store.memories, MINE, ("x",), now=T0)]
    assert listed == ["a", "b", "c", "c/d"]


async def test_a_filter_matches_as_langgraphs_stores_do(store: Store) -> None:
    values = [
        {"kind": "fact", "score": 3, "tags": ["x", "y"], "who": {"name": "ada", "age": 36}},
        {"kind": "fact", "score": 7.5, "tags": ["x"], "who": {"name": "bob"}},
        {"kind": "rule", "score": -1, "who": "nobody"},
        {"kind": "fact", "score": 0},
    ]
    await put_all(
        store,
        [item(("m",), str(n), v, at=T0 + timedelta(seconds=n)) for n, v in enumerate(values)],
    )
    reference = LangGraphMemoryStore()
    for n, value in enumerate(values):
        await reference.aput(("m",), str(n), value)
    filters: list[dict[str, Any]] = [
        {"kind": "fact"},
        {"kind": "fact", "score": 3},
        {"tags": ["x"]},
        {"tags": ["x", "y"]},
        {"who": {"name": "ada"}},
        {"who": "nobody"},
        {"score": {"$gt": 3}},
        {"score": {"$gte": 0, "$lt": 7.5}},
        {"score": {"$lte": 0}},
        {"kind": {"$ne": "fact"}},
        {"kind": {"$eq": "rule"}},
        {"missing": None},
    ]
    for condition in filters:
        ours = await search_items(store.memories, MINE, ("m",), now=T0, filter=condition)
        theirs = await reference.asearch(("m",), filter=condition)
        assert sorted(i.key for i in ours) == sorted(i.key for i in theirs), condition
    # Where LangGraph's in-memory store raises (an ordering on a value that is no number), the
    # item does not match.
    await store.memories.put(item(("m",), "odd", {"score": "high"}))
    ours = await search_items(store.memories, MINE, ("m",), now=T0, filter={"score": {"$gt": 5}})
    assert [i.key for i in ours] == ["1"]


async def test_namespaces_are_listed_as_langgraph_lists_them(store: Store) -> None:
    spaces = [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",), ("a", "x", "c")]
    await put_all(store, [item(ns, "k", {"v": 1}) for ns in spaces])
    await store.memories.put(item(("a", "b", "c"), "k2", {"v": 2}))  # two items, one namespace
    await store.memories.put(item(("hidden",), "k", {"v": 1}, tenant=THEIRS))
    reference = LangGraphMemoryStore()
    for ns in spaces:
        await reference.aput(ns, "k", {"v": 1})
    await reference.aput(("a", "b", "c"), "k2", {"v": 2})
    asks: list[dict[str, Any]] = [
        {},
        {"prefix": ("a",)},
        {"prefix": ("a", "*", "c")},
        {"suffix": ("c",)},
        {"prefix": ("a",), "suffix": ("d",)},
        {"max_depth": 1},
        {"prefix": ("a",), "max_depth": 2},
        {"limit": 2, "offset": 1},
    ]
    for ask in asks:
        ours = await namespaces_of(store.memories, MINE, now=T0, **ask)
        theirs = await reference.alist_namespaces(**ask)
        assert ours == theirs, ask


async def test_expired_items_are_neither_read_nor_listed_and_the_sweep_deletes_them(
    store: Store,
) -> None:
    await store.memories.put(item(("t",), "short", {"v": 1}, ttl=1))
    await store.memories.put(item(("t",), "long", {"v": 2}, ttl=60))
    await store.memories.put(item(("u",), "kept", {"v": 3}))
    later = T0 + timedelta(minutes=2)
    assert await get_item(store.memories, MINE, ("t",), "short", now=later) is None
    # Put in the same millisecond: in ``item_id``'s order, ("t",) before ("u",).
    assert [i.key for i in await search_items(store.memories, MINE, (), now=later)] == [
        "long",
        "kept",
    ]
    assert await namespaces_of(store.memories, MINE, now=later) == [("t",), ("u",)]
    assert await store.memories.expire(later, limit=100) == 1
    assert await store.memories.get(MINE, ("t",), "short") is None
    assert await store.memories.get(MINE, ("t",), "long") is not None
    assert await store.memories.expire(later, limit=100) == 0


async def test_a_refreshing_read_moves_the_expiry_and_a_plain_one_does_not(store: Store) -> None:
    await store.memories.put(item(("t",), "a", {"v": 1}, ttl=10))
    await store.memories.put(item(("t",), "b", {"v": 2}, ttl=10))
    read_at = T0 + timedelta(minutes=8)
    got = await get_item(store.memories, MINE, ("t",), "a", now=read_at)
    assert got is not None and got.expires_at == read_at + timedelta(minutes=10)
    await get_item(store.memories, MINE, ("t",), "b", now=read_at, refresh=False)
    after = T0 + timedelta(minutes=12)
    assert [i.key for i in await search_items(store.memories, MINE, ("t",), now=after)] == ["a"]
    stored = await store.memories.get(MINE, ("t",), "a")
    assert stored is not None and stored.expires_at == after + timedelta(minutes=10)
    assert stored.updated_at == T0  # a read is not an update


@pytest.mark.parametrize(
    ("namespace", "key", "value"),
    [
        ((), "k", {}),
        (("a.b",), "k", {}),
        (("",), "k", {}),
        (("langgraph", "x"), "k", {}),
        (("a",), "", {}),
        (("a",), "k", ["not", "an", "object"]),
        (("a",), "k", {"x": object()}),
        (("a\x00b",), "k", {}),
        (("a",), "k\x00", {}),
    ],
)
def test_what_langgraph_or_the_stores_refuse_is_refused_before_any_write(
    namespace: tuple[str, ...], key: str, value: Any
) -> None:
    with pytest.raises(InvalidMemory):
        new_item(MINE, namespace, key, value, ttl_minutes=None, now=T0)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), 1e300])
def test_a_ttl_out_of_range_is_refused(ttl: float) -> None:
    with pytest.raises(InvalidMemory):
        new_item(MINE, ("a",), "k", {}, ttl_minutes=ttl, now=T0)
