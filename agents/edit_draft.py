"""An agent written the way LangGraph's docs write "review and edit state": it drafts a reply,
and ``interrupt()`` returns the reviewer's edit itself, an object, which the graph uses as it
is. It declares no decisions, only the shape of the answer it takes (``answer_schema``), so
Interlock checks the edit before anything is stored and hands it over unchanged.

draft -> review (interrupt: {"edited_text": ...}) -> send (the ledger records what went out).
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from agents import ledger

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"edited_text": {"type": "string", "minLength": 1}},
    "required": ["edited_text"],
    "additionalProperties": False,
}


class DraftState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    draft: str
    sent: str


def draft(state: DraftState) -> DraftState:
    asked = " ".join(str(m.content) for m in state.get("messages", []) if m.type == "human")
    return {
        "draft": f"Thank you for your message ({asked.strip() or 'no text'}). We will reply soon."
    }


def review(state: DraftState) -> DraftState:
    edited = interrupt(
        {
            "instruction": "Review and edit this reply before it is sent",
            "draft": state["draft"],
            "answer_schema": ANSWER_SCHEMA,
        }
    )
    return {"draft": edited["edited_text"]}


def send(state: DraftState, config: RunnableConfig) -> DraftState:
    execution_id = str(config.get("configurable", {}).get("thread_id", "unknown"))
    ledger.record({"kind": "reply", "execution_id": execution_id, "text": state["draft"]})
    return {"sent": state["draft"], "messages": [AIMessage(content=state["draft"])]}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(DraftState)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_node("send", send)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", "send")
    graph.add_edge("send", END)
    return graph.compile(checkpointer=checkpointer)
