"""An agent that needs N approvals in a row: one execution that suspends N times.

N is the first number in the message (default 2, at most 20). Each approval step writes a ledger
entry after its decision, so tests can check each side effect happened exactly once.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from agents import ledger

MAX_STAGES = 20


class ChainState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    stages: int
    decisions: list[str]


def plan(state: ChainState) -> ChainState:
    text = " ".join(str(m.content) for m in state.get("messages", []))
    match = re.search(r"\d+", text)
    stages = min(int(match.group(0)), MAX_STAGES) if match else 2
    return {"stages": max(stages, 1), "decisions": []}


def approve_stage(state: ChainState, config: RunnableConfig) -> ChainState:
    stage = len(state.get("decisions", [])) + 1
    answer = interrupt(
        {
            "stage": stage,
            "of": state["stages"],
            "task_description": f"Approve stage {stage} of {state['stages']}",
            "allowed_decisions": ["approve", "reject"],
        }
    )
    ledger.record(
        {
            "kind": "stage",
            "execution_id": str(config.get("configurable", {}).get("thread_id")),
            "stage": stage,
            "decision": answer["decision"],
        }
    )
    return {"decisions": [*state.get("decisions", []), answer["decision"]]}


def next_step(state: ChainState) -> str:
    decisions = state.get("decisions", [])
    if decisions and decisions[-1] != "approve":
        return END
    return END if len(decisions) >= state["stages"] else "approve_stage"


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(ChainState)
    graph.add_node("plan", plan)
    graph.add_node("approve_stage", approve_stage)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve_stage")
    graph.add_conditional_edges("approve_stage", next_step, ["approve_stage", END])
    return graph.compile(checkpointer=checkpointer)
