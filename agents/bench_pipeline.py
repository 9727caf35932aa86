"""The benchmark workload (``bench/``): durable steps, one review, two durable steps after it.

``prepare`` runs N durable steps and then asks for a decision; on resume LangGraph runs it again
from its first line, so the N steps come back from the step cache (figure 3 of
docs/benchmarks.md times that replay). ``act`` then runs two more durable steps. N is 3 unless
the message says ``steps=N`` (at most 5,000).

With ``model_ms=M`` in the message, a model call taking M ms (the scripted model, awaited as a
remote model's call is) comes first, and its start and end times go into the review's payload
(``model_call``): the concurrency benchmarks and tests see from them how many runs overlapped.

The agent stamps what the harness cannot see from outside: the wall-clock time at which the
first step after the decision ran (``resumed_at``; every process is on one machine, so the
clocks agree) and how long the re-run of ``prepare`` took to get its cached steps back.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from agents.fake_model import ScriptedChatModel
from interlock.sdk import durable_step

DEFAULT_STEPS = 3
MAX_STEPS = 5_000
_STEPS = re.compile(r"steps=(\d+)")
_MODEL_MS = re.compile(r"model_ms=(\d+)")
MAX_MODEL_MS = 60_000


class BenchState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    steps: int
    decision: str
    replay_seconds: float
    model_call: list[float]
    """``time.time()`` when the model call started and ended (with ``model_ms``)."""
    """How long the resumed run of ``prepare`` took to get its N steps back from the cache."""
    resumed_at: float
    """``time.time()`` when the first step after the decision ran."""
    finished_at: float


@durable_step(name="bench_work")
def work(index: int) -> str:
    """A step with no work of its own: what is measured is what durability costs."""
    return f"done-{index}"


@durable_step(name="bench_stamp")
def stamp(label: str) -> float:
    """The time this step first ran (a replay returns the stored time)."""
    return time.time()


def step_count(state: BenchState) -> int:
    text = " ".join(str(m.content) for m in state.get("messages", []))
    match = _STEPS.search(text)
    return min(int(match.group(1)), MAX_STEPS) if match else DEFAULT_STEPS


def model_ms(state: BenchState) -> int:
    text = " ".join(str(m.content) for m in state.get("messages", []))
    match = _MODEL_MS.search(text)
    return min(int(match.group(1)), MAX_MODEL_MS) if match else 0


async def think(state: BenchState) -> BenchState:
    model = ScriptedChatModel(script=lambda _: (), latency_seconds=model_ms(state) / 1000)
    started = time.time()
    answer = await model.ainvoke(state.get("messages", []))
    return {"messages": [answer], "model_call": [started, time.time()]}


def first_node(state: BenchState) -> str:
    return "think" if model_ms(state) else "prepare"


def prepare(state: BenchState) -> BenchState:
    steps = step_count(state)
    began = time.perf_counter()
    for index in range(steps):
        work(index)
    replay_seconds = time.perf_counter() - began
    answer = interrupt(
        {
            "task_description": f"Benchmark: {steps} steps done; continue?",
            "steps": steps,
            **({"model_call": state["model_call"]} if "model_call" in state else {}),
            "allowed_decisions": ["approve", "reject"],
        }
    )
    # Only the resumed run gets here, so the time above is the replay's.
    return {"steps": steps, "decision": str(answer["decision"]), "replay_seconds": replay_seconds}


def act(state: BenchState) -> BenchState:
    resumed_at = stamp("after-decision-1")
    finished_at = stamp("after-decision-2")
    return {"resumed_at": resumed_at, "finished_at": finished_at}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(BenchState)
    graph.add_node("think", think)
    graph.add_node("prepare", prepare)
    graph.add_node("act", act)
    graph.add_conditional_edges(START, first_node, ["think", "prepare"])
    graph.add_edge("think", "prepare")
    graph.add_edge("prepare", "act")
    graph.add_edge("act", END)
    return graph.compile(checkpointer=checkpointer)
