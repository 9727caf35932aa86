"""An agent with long-term memory, as LangGraph's memory docs write one: a ``MessagesState``
graph whose node takes the ``store``, compiled with LangGraph's ``InMemoryStore`` (Interlock
replaces it with the workspace's durable store, as it replaces the checkpointer).

"remember <fact>" stores the fact under ("facts",) and then asks a reviewer to confirm it (the
write comes before the ``interrupt()``, so the node runs again on resume: the write is a durable
step and is not made twice). "forget" deletes what it remembers; anything else answers with the
facts it finds, from any thread of the workspace. The sync twin (``build_sync_graph``) does the
same from a sync node, through the store's sync methods.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import interrupt

FACTS = ("facts",)


def _last_human(state: MessagesState) -> str:
    said = [m for m in state["messages"] if m.type == "human"]
    content = said[-1].content if said else ""
    return content if isinstance(content, str) else str(content)


def _confirmed(fact: str) -> str:
    decision: Any = interrupt(
        {"task_description": f"Remember: {fact}", "allowed_decisions": ["approve", "reject"]}
    )
    return str(decision.get("decision") if isinstance(decision, dict) else decision)


def _known(texts: list[str]) -> str:
    return "I remember: " + "; ".join(texts) if texts else "I remember nothing"


async def respond(state: MessagesState, *, store: BaseStore) -> dict[str, list[AnyMessage]]:
    said = _last_human(state)
    if said.startswith("remember "):
        fact = said.removeprefix("remember ")
        await store.aput(FACTS, "latest", {"text": fact})
        return {"messages": [AIMessage(f"noted {fact!r}; reviewer said {_confirmed(fact)}")]}
    if said == "forget":
        await store.adelete(FACTS, "latest")
        return {"messages": [AIMessage("forgotten")]}
    found = await store.asearch(FACTS)
    return {"messages": [AIMessage(_known([item.value["text"] for item in found]))]}


def respond_sync(state: MessagesState, *, store: BaseStore) -> dict[str, list[AnyMessage]]:
    said = _last_human(state)
    if said.startswith("remember "):
        fact = said.removeprefix("remember ")
        store.put(FACTS, "latest", {"text": fact})
        return {"messages": [AIMessage(f"noted {fact!r}; reviewer said {_confirmed(fact)}")]}
    found = store.search(FACTS)
    return {"messages": [AIMessage(_known([item.value["text"] for item in found]))]}


def _build(node: Any, checkpointer: BaseCheckpointSaver[Any] | None) -> CompiledStateGraph[Any]:
    graph = StateGraph(MessagesState)
    graph.add_node("respond", node)
    graph.add_edge(START, "respond")
    return graph.compile(checkpointer=checkpointer, store=InMemoryStore())


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    return _build(respond, checkpointer)


def build_sync_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any]:
    return _build(respond_sync, checkpointer)
