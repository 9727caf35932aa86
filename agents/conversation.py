"""A chat agent for conversations: LangGraph's ``MessagesState`` graph, one node, as LangGraph's
docs write it. Each reply names every earlier human message of the thread, so a turn that did
not see the ones before it shows. A message asking for a refund waits for a reviewer (approve /
reject); a message "wait N" takes N seconds (a busy thread, for the busy-thread policies).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

MAX_WAIT_SECONDS = 30.0


def _text(message: AnyMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


async def respond(state: MessagesState) -> dict[str, list[AnyMessage]]:
    said = [_text(m) for m in state["messages"] if m.type == "human"]
    last = said[-1] if said else ""
    waited = re.search(r"\bwait (\d+(?:\.\d+)?)", last)
    if waited:
        await asyncio.sleep(min(float(waited.group(1)), MAX_WAIT_SECONDS))
    reply = f"turn {len(said)}: you said {last!r}; before: {said[:-1]!r}"
    if "refund" in last.lower():
        decision: Any = interrupt(
            {
                "task_description": f"Approve: {last}",
                "allowed_decisions": ["approve", "reject"],
            }
        )
        word = decision.get("decision") if isinstance(decision, dict) else decision
        reply = f"{reply}; reviewer said {word}"
    return {"messages": [AIMessage(reply)]}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(MessagesState)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    return graph.compile(checkpointer=checkpointer)
