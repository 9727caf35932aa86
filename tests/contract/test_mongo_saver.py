"""The sandbox's MongoDB checkpointer (point reads and writes by ``_id``) answers every read
exactly as LangGraph's own does, on a real MongoDB-compatible server with a real graph's
checkpoints: the latest, each one by id, the pending writes of a suspended run, and a thread that
has none. LangGraph's saver reads what it wrote, and it reads and continues a thread that
LangGraph's saver began, LangGraph's way."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pymongo import MongoClient, monitoring

from services.sandbox.mongo_saver import HEADS_COLLECTION, PointReadMongoDBSaver, key_of
from tests.conftest import unique_name

pytestmark = pytest.mark.integration


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def first(state: State) -> State:
    return {"log": ["first"]}


def review(state: State) -> State:
    answer = interrupt({"question": "go on?"})
    return {"log": [f"review:{answer}"]}


def graph_on(saver: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("review", review)
    builder.add_edge(START, "first")
    builder.add_edge("first", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def same(ours: CheckpointTuple | None, theirs: CheckpointTuple | None) -> bool:
    """Equal tuples, but for the order of pending writes: LangGraph writes them from concurrent
    calls, and its MongoDB saver returns them in whatever order the server stored them."""

    def normalized(t: CheckpointTuple | None) -> object:
        if t is None:
            return None
        return t._replace(pending_writes=sorted(t.pending_writes, key=repr))

    return normalized(ours) == normalized(theirs)


async def test_point_reads_match_langgraphs_saver(mongodb_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(mongodb_uri, tz_aware=True)
    database = unique_name("saver")
    try:
        ours = await asyncio.to_thread(PointReadMongoDBSaver, client, db_name=database)
        theirs = await asyncio.to_thread(MongoDBSaver, client, db_name=database)
        graph = graph_on(ours)
        for thread in ("t-1", "t-2"):
            config = {"configurable": {"thread_id": thread}}
            await graph.ainvoke({"log": []}, config)
            suspended = await ours.aget_tuple(config)
            assert suspended is not None and suspended.pending_writes  # the interrupt
            assert same(suspended, await theirs.aget_tuple(config))
            await graph.ainvoke(Command(resume="yes"), config)

        config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        latest = await ours.aget_tuple(config)
        assert latest is not None
        assert same(latest, await theirs.aget_tuple(config))
        assert latest.checkpoint["channel_values"]["log"] == ["first", "review:yes"]
        history = [t async for t in theirs.alist(config)]
        assert len(history) >= 4
        for expected in history:
            assert same(await ours.aget_tuple(expected.config), expected)
        assert await ours.aget_tuple({"configurable": {"thread_id": "none"}}) is None
        with pytest.raises(ValueError, match="thread_id"):
            await ours.aget_tuple({"configurable": {"thread_id": {"$ne": ""}}})
    finally:
        client.drop_database(database)
        client.close()


async def test_its_documents_are_keyed_and_its_heads_point_at_the_newest(mongodb_uri: str) -> None:
    client: MongoClient[Any] = MongoClient(mongodb_uri, tz_aware=True)
    database = unique_name("saver")
    try:
        ours = await asyncio.to_thread(PointReadMongoDBSaver, client, db_name=database)
        config = {"configurable": {"thread_id": "t-keyed"}}
        graph = graph_on(ours)
        await graph.ainvoke({"log": []}, config)
        await graph.ainvoke(Command(resume="no"), config)
        latest = await ours.aget_tuple(config)
        assert latest is not None
        checkpoint_id = latest.config["configurable"]["checkpoint_id"]
        head = client[database][HEADS_COLLECTION].find_one({"_id": key_of("t-keyed", "")})
        assert head is not None and head["checkpoint_id"] == checkpoint_id
        ids = [d["_id"] for d in client[database]["checkpoints"].find({"thread_id": "t-keyed"})]
        assert ids and all(isinstance(i, str) and i.startswith('["t-keyed",""') for i in ids)
        writes = list(client[database]["checkpoint_writes"].find({"thread_id": "t-keyed"}))
        assert writes and all(isinstance(w["_id"], str) for w in writes)
    finally:
        client.drop_database(database)
        client.close()


async def test_a_thread_langgraphs_saver_began_is_read_and_continued_its_way(
    mongodb_uri: str,
) -> None:
    """Sandboxes upgraded while runs were suspended: the run resumes from LangGraph's documents,
    and its new checkpoints stay in LangGraph's format (no head), so its writes never split."""
    client: MongoClient[Any] = MongoClient(mongodb_uri, tz_aware=True)
    database = unique_name("saver")
    try:
        theirs = await asyncio.to_thread(MongoDBSaver, client, db_name=database)
        config = {"configurable": {"thread_id": "t-old"}}
        await graph_on(theirs).ainvoke({"log": []}, config)
        ours = await asyncio.to_thread(PointReadMongoDBSaver, client, db_name=database)
        assert same(await ours.aget_tuple(config), await theirs.aget_tuple(config))
        result = await graph_on(ours).ainvoke(Command(resume="yes"), config)
        assert result["log"] == ["first", "review:yes"]
        assert client[database][HEADS_COLLECTION].count_documents({"thread_id": "t-old"}) == 0
        assert same(await ours.aget_tuple(config), await theirs.aget_tuple(config))
    finally:
        client.drop_database(database)
        client.close()


class FieldQueries(monitoring.CommandListener):
    """Counts the commands on the checkpoint collections that select by anything but ``_id``."""

    def __init__(self) -> None:
        self.count = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command.get(event.command_name) not in ("checkpoints", "checkpoint_writes"):
            return
        selectors = [event.command.get("filter")] + [
            u.get("q") for u in event.command.get("updates", [])
        ]
        if any(isinstance(q, dict) and set(q) - {"_id"} for q in selectors):
            self.count += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_a_run_queries_nothing_but_ids(mongodb_uri: str) -> None:
    """FerretDB scans a collection for any other query: a run must not make one."""
    queries = FieldQueries()
    client: MongoClient[Any] = MongoClient(mongodb_uri, tz_aware=True, event_listeners=[queries])
    database = unique_name("saver")
    try:
        ours = await asyncio.to_thread(PointReadMongoDBSaver, client, db_name=database)
        graph = graph_on(ours)
        config = {"configurable": {"thread_id": "t-ids"}}
        await graph.ainvoke({"log": []}, config)
        await graph.ainvoke(Command(resume="yes"), config)
        assert (await ours.aget_tuple(config)) is not None
        assert queries.count == 0
    finally:
        client.drop_database(database)
        client.close()
