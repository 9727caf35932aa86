"""An outreach agent whose side effects are durable steps: emails go out once, whatever happens.

Each stage emails a prospect (a real HTTP call to the effects endpoint, carrying the step's
idempotency key) and then asks a reviewer to approve the next stage; after the last approval it
sends a confirmation. Without durable steps the email before each ``interrupt()`` would be sent
again on every resume, because LangGraph re-runs the interrupted node from its first line.

The number of stages is the first number in the message (default 1, at most 10).
``INTERLOCK_EFFECTS_URL`` is where the emails go (an HTTP service that records them).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any

import httpx
from langchain_core.messages import AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from interlock.sdk import durable_step

MAX_STAGES = 10


class OutreachState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    stages: int
    sent: list[str]
    approvals: list[str]


def _effects_url() -> str:
    return os.environ.get("INTERLOCK_EFFECTS_URL", "http://127.0.0.1:8099")


@durable_step(name="send_email")
def send_email(to: str, subject: str, *, idempotency_key: str = "") -> str:
    """POST the email; the effects service applies each idempotency key once. The durable step
    passes the key, so callers leave it out (the default: a call outside Interlock has none)."""
    response = httpx.post(
        f"{_effects_url()}/effects/email",
        json={"to": to, "subject": subject},
        headers={"Idempotency-Key": idempotency_key},
        timeout=10,
    )
    response.raise_for_status()
    return str(response.json()["message_id"])


def plan(state: OutreachState) -> OutreachState:
    text = " ".join(str(m.content) for m in state.get("messages", []))
    match = re.search(r"\d+", text)
    stages = min(int(match.group(0)), MAX_STAGES) if match else 1
    return {"stages": max(stages, 1), "sent": [], "approvals": []}


def stage(state: OutreachState) -> OutreachState:
    number = len(state.get("approvals", [])) + 1
    message_id = send_email("prospect@example.com", f"Stage {number} of {state['stages']}")
    answer = interrupt(
        {
            "stage": number,
            "task_description": f"Email {number} sent ({message_id}); approve stage {number + 1}?",
            "allowed_decisions": ["approve", "reject"],
        }
    )
    return {
        "sent": [*state.get("sent", []), message_id],
        "approvals": [*state.get("approvals", []), str(answer["decision"])],
    }


def after_stage(state: OutreachState) -> str:
    approvals = state.get("approvals", [])
    if approvals[-1] != "approve":
        return END
    return "confirm" if len(approvals) >= state["stages"] else "stage"


def confirm(state: OutreachState) -> OutreachState:
    message_id = send_email("prospect@example.com", "Confirmed")
    return {"sent": [*state.get("sent", []), message_id]}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(OutreachState)
    graph.add_node("plan", plan)
    graph.add_node("stage", stage)
    graph.add_node("confirm", confirm)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "stage")
    graph.add_conditional_edges("stage", after_stage, ["stage", "confirm", END])
    graph.add_edge("confirm", END)
    return graph.compile(checkpointer=checkpointer)
