"""The sandbox's MongoDB checkpointer answers every read exactly as LangGraph's own does (it
only avoids the server-side sort FerretDB cannot push down), on a real MongoDB-compatible server
with a real graph's checkpoints: the latest, each one by id, and a thread that has none."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from pymongo import MongoClient

from services.sandbox.mongo_saver import PointReadMongoDBSaver
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
            await graph.ainvoke(Command(resume="yes"), config)

        config = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
        latest = await ours.aget_tuple(config)
        assert latest is not None
        assert latest == await theirs.aget_tuple(config)
        assert latest.checkpoint["channel_values"]["log"] == ["first", "review:yes"]
        history = [t async for t in theirs.alist(config)]
        assert len(history) >= 4
        for expected in history:
            assert await ours.aget_tuple(expected.config) == expected
        assert await ours.aget_tuple({"configurable": {"thread_id": "none"}}) is None
        with pytest.raises(ValueError, match="thread_id"):
            await ours.aget_tuple({"configurable": {"thread_id": {"$ne": ""}}})
    finally:
        client.drop_database(database)
        client.close()
