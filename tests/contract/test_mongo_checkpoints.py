"""The sandbox's async MongoDB checkpointer (services/sandbox/mongo_checkpoints.py) on a real
MongoDB-compatible server: LangGraph's own conformance suite for savers (outside a run and
inside one), a real graph suspended on one replica and resumed on another, a thread the
point-read saver before it began, and what a run costs in commands."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pymongo import AsyncMongoClient, MongoClient, monitoring

from services.sandbox.checkpoint_run import known_to_be_new
from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.mongo_checkpoints import AsyncMongoSaver, run_scope
from services.sandbox.thread_base import copy_base
from shared.errors import Fenced
from shared.events import ThreadTurn
from tests.conftest import unique_name
from tests.contract.legacy_point_read_saver import PointReadMongoDBSaver

pytestmark = pytest.mark.integration


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def first(state: State) -> State:
    return {"log": ["first"]}


def review(state: State) -> State:
    return {"log": [f"review:{interrupt({'question': 'go on?'})}"]}


def last(state: State) -> State:
    return {"log": ["last"]}


def graph_on(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("review", review)
    builder.add_node("last", last)
    builder.add_edge(START, "first")
    builder.add_edge("first", "review")
    builder.add_edge("review", "last")
    builder.add_edge("last", END)
    return builder.compile(checkpointer=saver)


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in {
            "find",
            "insert",
            "update",
            "delete",
            "aggregate",
            "findAndModify",
        }:
            self.seen.append((event.command_name, event.command.get(event.command_name)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def database(mongodb_uri: str) -> AsyncIterator[tuple[Any, Commands, str]]:
    commands = Commands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, event_listeners=[commands]
    )
    name = unique_name("checkpoints")
    try:
        yield client[name], commands, name
    finally:
        await client.drop_database(name)
        await client.close()


async def test_it_passes_langgraphs_conformance_suite(database: tuple[Any, Commands, str]) -> None:
    db, _, _ = database

    @checkpointer_test(name="AsyncMongoSaver")
    async def saver() -> AsyncIterator[AsyncMongoSaver]:
        yield AsyncMongoSaver(db)

    report = await validate(saver)
    report.print_report()
    assert report.passed_all_base()


async def test_it_passes_the_suite_inside_a_run_scope_too(
    database: tuple[Any, Commands, str],
) -> None:
    """Within a run the saver answers from memory what it read or wrote: the same answers."""
    db, _, _ = database

    @checkpointer_test(name="AsyncMongoSaver in a run")
    async def saver() -> AsyncIterator[AsyncMongoSaver]:
        async with run_scope():
            yield AsyncMongoSaver(db)

    report = await validate(saver)
    report.print_report()
    assert report.passed_all_base()


async def test_a_run_suspended_on_one_replica_resumes_on_another(
    database: tuple[Any, Commands, str],
) -> None:
    db, commands, _ = database
    config = {"configurable": {"thread_id": "exec-1"}}
    async with run_scope():
        graph = graph_on(AsyncMongoSaver(db))
        started = await graph.ainvoke({"log": []}, config, durability="exit")
        assert "__interrupt__" in started
        suspended = await graph.aget_state(config)
    first_segment = list(commands.seen)
    assert suspended.next == ("review",) and len(suspended.interrupts) == 1
    # One read of the head (none yet), then one write when the run ends: the checkpoint and
    # its pending writes (the interrupt) in the head.
    assert first_segment == [("find", "checkpoint_heads"), ("findAndModify", "checkpoint_heads")]

    commands.seen.clear()
    async with run_scope():
        other = graph_on(AsyncMongoSaver(db))  # another sandbox replica: nothing in memory
        before = await other.aget_state(config)
        assert [i.id for i in before.interrupts] == [i.id for i in suspended.interrupts]
        done = await other.ainvoke(Command(resume="yes"), config, durability="exit")
        after = await other.aget_state(config)
    assert done["log"] == ["first", "review:yes", "last"]
    assert after.next == () and after.values["log"] == done["log"]
    # The head (the checkpoint and its writes) read once for the run; one write when it ends,
    # and the checkpoint it replaced archived.
    assert commands.seen == [
        ("find", "checkpoint_heads"),
        ("findAndModify", "checkpoint_heads"),
        ("update", "checkpoints"),
    ]


async def test_writes_stored_concurrently_with_their_checkpoint_are_read_back(
    database: tuple[Any, Commands, str],
) -> None:
    """LangGraph may store a run's last writes while its checkpoint is being stored: a write
    that finishes after the checkpoint's put must still be what the run reads back."""
    db, _, _ = database
    saver = AsyncMongoSaver(db)
    config = {"configurable": {"thread_id": "exec-c", "checkpoint_ns": ""}}
    async with run_scope():
        graph = graph_on(saver)
        await graph.ainvoke({"log": []}, config, durability="exit")
        stored = await saver.aget_tuple(config)
        assert stored is not None
        checkpoint, metadata = stored.checkpoint, stored.metadata
        racing = {**checkpoint, "id": str(uuid6(clock_seq=1))}  # newer, as LangGraph makes them
        at = {"configurable": {**config["configurable"], "checkpoint_id": racing["id"]}}
        await asyncio.gather(
            saver.aput(config, racing, metadata, {}),
            saver.aput_writes(at, [("__interrupt__", "late")], "task-late"),
        )
        in_memory = await saver.aget_tuple(config)
    async with run_scope():
        from_database = await saver.aget_tuple(config)
    assert in_memory is not None and from_database is not None
    assert in_memory.pending_writes == from_database.pending_writes
    assert ("task-late", "__interrupt__", "late") in in_memory.pending_writes


async def test_a_thread_the_point_read_saver_began_resumes(
    database: tuple[Any, Commands, str], mongodb_uri: str
) -> None:
    """An execution suspended before the upgrade resumes after it."""
    _, _, name = database
    config = {"configurable": {"thread_id": "exec-old"}}
    sync_client: MongoClient[dict[str, Any]] = MongoClient(mongodb_uri, tz_aware=True)
    try:
        old = graph_on(PointReadMongoDBSaver(sync_client, db_name=name))
        await old.ainvoke({"log": []}, config)
        waiting = await old.aget_state(config)
    finally:
        sync_client.close()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_uri, tz_aware=True)
    try:
        async with run_scope():
            new = graph_on(AsyncMongoSaver(client[name]))
            now = await new.aget_state(config)
            assert [i.id for i in now.interrupts] == [i.id for i in waiting.interrupts]
            done = await new.ainvoke(Command(resume="later"), config, durability="exit")
    finally:
        await client.close()
    assert done["log"] == ["first", "review:later", "last"]


async def test_a_superseded_attempts_checkpoint_puts_the_newer_one_back_and_stops(
    database: tuple[Any, Commands, str],
) -> None:
    """Fencing rides on the checkpoint write: the head says which attempt wrote it, and a run
    whose put replaced a newer attempt's head restores it and raises Fenced."""
    db, _, _ = database
    saver = AsyncMongoSaver(db)
    config = {"configurable": {"thread_id": "exec-z"}}

    def attempt(number: int) -> dict[str, Any]:
        return {"steps": [], "attempt": [1, number]}

    def may_replace(mine: int) -> Any:
        return lambda kept: kept is None or tuple(kept["attempt"]) <= (1, mine)

    async with run_scope(extra=lambda: attempt(2), guard=may_replace(2)):
        await graph_on(saver).ainvoke({"log": []}, config, durability="exit")
    newer = await db["checkpoint_heads"].find_one({})
    assert newer["interlock"]["attempt"] == [1, 2]

    with pytest.raises(Fenced):
        async with run_scope(extra=lambda: attempt(1), guard=may_replace(1)):
            await graph_on(saver).ainvoke({"log": []}, config, durability="exit")
    assert await db["checkpoint_heads"].find_one({}) == newer  # put back, as it was
    async with run_scope():
        state = await graph_on(saver).aget_state(config)
    assert len(state.interrupts) == 1 and state.values["log"] == ["first"]


async def test_a_write_made_outside_a_run_joins_the_writes_its_head_holds(
    database: tuple[Any, Commands, str],
) -> None:
    db, _, _ = database
    saver = AsyncMongoSaver(db)
    config = {"configurable": {"thread_id": "exec-w", "checkpoint_ns": ""}}
    async with run_scope():
        await graph_on(saver).ainvoke({"log": []}, config, durability="exit")
    head = await db["checkpoint_heads"].find_one({})
    assert head["writes_complete"] is True and len(head["writes"]) == 1  # the interrupt
    at = {"configurable": {**config["configurable"], "checkpoint_id": head["checkpoint_id"]}}
    await saver.aput_writes(at, [("log", ["outside"])], "task-outside")
    for reader in (None, run_scope()):
        if reader is None:
            stored = await saver.aget_tuple(config)
        else:
            async with reader:
                stored = await saver.aget_tuple(config)
        assert stored is not None
        assert ("task-outside", "log", ["outside"]) in stored.pending_writes
        assert len(stored.pending_writes) == 2


async def test_a_run_that_raises_stores_nothing_more(database: tuple[Any, Commands, str]) -> None:
    db, _, _ = database
    config = {"configurable": {"thread_id": "exec-r"}}
    with pytest.raises(RuntimeError):
        async with run_scope():
            await graph_on(AsyncMongoSaver(db)).ainvoke({"log": []}, config, durability="exit")
            raise RuntimeError("the database failed, or the run was fenced")
    assert await db["checkpoint_heads"].find_one({}) is None


async def test_a_turn_starts_from_its_bases_copy_and_stores_only_its_own_checkpoint(
    database: tuple[Any, Commands, str],
) -> None:
    """A thread's next turn copies its base's checkpoint into its own thread and runs on it:
    one read of the base, one write of the turn's head; the copy, replaced within the run, is
    never stored (it is in the base's history already)."""
    db, commands, _ = database
    saver = AsyncMongoSaver(db)
    graph = graph_on(saver)
    base = {"configurable": {"thread_id": "turn-1"}}
    async with run_scope():
        await graph.ainvoke({"log": []}, base, durability="exit")
        await graph.ainvoke(Command(resume="ok"), base, durability="exit")
    commands.seen.clear()
    turn = {"configurable": {"thread_id": "turn-2"}}
    async with run_scope():
        known_to_be_new("turn-2")
        assert await copy_base(saver, ThreadTurn(thread_id="t", turn=2, base="turn-1"), turn)
        second = await graph.ainvoke({"log": ["again"]}, turn, durability="exit")
    assert commands.seen == [("find", "checkpoint_heads"), ("findAndModify", "checkpoint_heads")]
    before = (await graph.aget_state(base)).values["log"]
    assert second["log"][: len(before)] == before and len(second["log"]) > len(before)
    assert await db["checkpoints"].count_documents({"thread_id": "turn-2"}) == 0


class CountedCheckpoints:
    """The saver's serializer, counting what it encodes and decodes of checkpoints (their writes
    and metadata are small, and not counted)."""

    def __init__(self, serde: Any) -> None:
        self.serde, self.encoded, self.decoded = serde, 0, 0

    @staticmethod
    def _is_checkpoint(value: Any) -> bool:
        return isinstance(value, dict) and "channel_values" in value

    def dumps_typed(self, value: Any) -> tuple[str, bytes]:
        self.encoded += self._is_checkpoint(value)
        return self.serde.dumps_typed(value)  # type: ignore[no-any-return]

    def loads_typed(self, typed: tuple[str, bytes]) -> Any:
        value = self.serde.loads_typed(typed)
        self.decoded += self._is_checkpoint(value)
        return value


async def test_a_turn_decodes_the_conversation_once_and_encodes_it_once(
    database: tuple[Any, Commands, str],
) -> None:
    """A turn's checkpoint is the whole conversation, so each pass over it grows with the turns:
    the copy of the base moves its stored bytes, the guard's size check and the put share one
    encoding, and only the graph's read of its thread decodes (4 encodes and 2 decodes before)."""
    db, _, _ = database
    saver = AsyncMongoSaver(db)
    guarded = GuardedSaver(saver, max_checkpoint_bytes=1_000_000)
    graph = graph_on(guarded)
    base = {"configurable": {"thread_id": "turn-1"}}
    async with run_scope():
        await graph.ainvoke({"log": []}, base, durability="exit")
        await graph.ainvoke(Command(resume="ok"), base, durability="exit")
    counted = CountedCheckpoints(saver.serde)
    saver.serde = guarded.serde = counted  # type: ignore[assignment]
    turn = {"configurable": {"thread_id": "turn-2"}}
    async with run_scope():
        known_to_be_new("turn-2")
        assert await copy_base(guarded, ThreadTurn(thread_id="t", turn=2, base="turn-1"), turn)
        second = await graph.ainvoke({"log": ["again"]}, turn, durability="exit")
    assert (counted.encoded, counted.decoded) == (1, 1)
    assert second["log"][:4] == ["first", "review:ok", "last", "again"]
    stored = await saver.aget_tuple(turn)
    assert stored is not None and stored.checkpoint["channel_values"]["log"] == second["log"]
