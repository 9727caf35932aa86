"""The progress recorder: LangGraph stream chunks become batched, bounded progress entries."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from pymongo.errors import AutoReconnect

from services.sandbox import progress as progress_module
from services.sandbox.progress import STREAM_MODES, ProgressRecorder
from shared.store.memory.progress import InMemoryProgressLog
from shared.store.progress import ProgressEntry


def chatty_graph() -> Any:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Refund approved for CLM-4821")]))

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    return graph.compile(checkpointer=InMemorySaver())


async def record(log: Any, graph: Any) -> ProgressRecorder:
    recorder = ProgressRecorder(log, project_id="p", execution_id="ex", epoch=1, attempt=1)
    config: Any = {"configurable": {"thread_id": "ex"}}
    stream = graph.astream({"messages": [HumanMessage("hi")]}, config, stream_mode=STREAM_MODES)
    async for mode, chunk in stream:
        await recorder.observe(mode, chunk)
    await recorder.flush()
    return recorder


async def test_streamed_tokens_are_coalesced_and_precede_the_node_update() -> None:
    log = InMemoryProgressLog()
    await record(log, chatty_graph())
    entries = await log.after("p", "ex", "")
    tokens = [e for e in entries if e.kind == "token"]
    # The fake model streams word by word; one flush window coalesces them.
    assert "".join(e.data["text"] for e in tokens) == "Refund approved for CLM-4821"
    assert len(tokens) < 5
    assert {e.data["node"] for e in tokens} == {"answer"}
    update = entries[-1]
    assert update.kind == "update" and update.data["node"] == "answer"
    assert update.data["update"]["messages"][0]["content"] == "Refund approved for CLM-4821"
    assert [e.key for e in entries] == sorted(e.key for e in entries)


async def test_a_huge_node_update_is_reported_by_size_only(monkeypatch: Any) -> None:
    monkeypatch.setattr(progress_module, "MAX_ENTRY_BYTES", 50)
    log = InMemoryProgressLog()
    await record(log, chatty_graph())
    update = (await log.after("p", "ex", ""))[-1]
    assert update.data == {"node": "answer", "truncated": True, "bytes": update.data["bytes"]}
    assert update.data["bytes"] > 50


class BrokenLog(InMemoryProgressLog):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [AutoReconnect("database went away"), sqlite3.OperationalError("database is locked")],
    ids=["mongodb-unreachable", "sqlite-busy"],
)
async def test_a_store_that_does_not_answer_costs_the_progress_not_the_run(
    error: Exception,
) -> None:
    recorder = await record(BrokenLog(error), chatty_graph())
    await recorder.flush()  # nothing pending, nothing raised


async def test_a_progress_write_failing_for_a_reason_a_retry_cannot_fix_is_raised() -> None:
    with pytest.raises(TypeError, match="not serialisable"):
        await record(BrokenLog(TypeError("not serialisable")), chatty_graph())


async def test_a_run_that_stops_before_any_node_reports_costs_no_progress_write() -> None:
    """Its first state is kept only once something else is recorded: a run interrupted in its
    first node stops with the state its suspension holds, and writes nothing here."""
    from langgraph.types import interrupt

    def ask(state: MessagesState) -> dict[str, Any]:
        interrupt("ok?")
        return {}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    log = InMemoryProgressLog()
    await record(log, graph.compile(checkpointer=InMemorySaver()))
    assert await log.after("p", "ex", "") == []


async def test_the_first_state_is_stored_first_once_a_node_reports() -> None:
    log = InMemoryProgressLog()
    await record(log, chatty_graph())
    entries = await log.after("p", "ex", "")
    assert entries[0].kind == "values"
    assert entries[0].data["values"]["messages"][0]["content"] == "hi"
    assert entries[0].key < entries[1].key
