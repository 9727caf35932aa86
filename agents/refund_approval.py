"""The refund approval agent from the Atlas HITL guide.

lookup_claim -> review (interrupt: approve / reject) -> issue_refund | record_rejection.
Issuing the refund is the side effect a reviewer guards; it is written to the ledger.
"""

from __future__ import annotations

import re
import uuid
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

CLAIMS: dict[str, dict[str, Any]] = {
    "CLM-4821": {"order_id": "98765", "amount": 240, "currency": "USD"},
    "CLM-1002": {"order_id": "55501", "amount": 35, "currency": "USD"},
}
DEFAULT_CLAIM = "CLM-4821"


class ClaimNotFound(LookupError):
    pass


class RefundState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    claim_id: str
    claim: dict[str, Any]
    review: dict[str, Any]
    outcome: str
    refund_id: str


def _execution_id(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id", "unknown"))


def _custom_headers(config: RunnableConfig) -> dict[str, str]:
    """The caller's X-Interlock-Custom-* headers of this run segment (the ledger shows which
    ones reached the agent)."""
    return dict(config.get("configurable", {}).get("custom_headers") or {})


def lookup_claim(state: RefundState) -> RefundState:
    # The latest request that names a claim is the one to review: in a conversation (a session,
    # a thread's later turn) the earlier turns named others.
    said = [str(m.content) for m in state.get("messages", []) if m.type == "human"]
    found = (re.search(r"CLM-\d+", text) for text in reversed(said))
    match = next((m for m in found if m), None)
    claim_id = match.group(0) if match else DEFAULT_CLAIM
    claim = CLAIMS.get(claim_id)
    if claim is None:
        raise ClaimNotFound(f"claim {claim_id} does not exist")
    return {"claim_id": claim_id, "claim": claim}


def review(state: RefundState) -> RefundState:
    claim = state["claim"]
    decision = interrupt(
        {
            "claim_id": state["claim_id"],
            "task_description": (
                f"Approve refund of ${claim['amount']} for order #{claim['order_id']}"
            ),
            "allowed_decisions": ["approve", "reject"],
        }
    )
    return {"review": dict(decision)}


def route(state: RefundState) -> str:
    return "issue_refund" if state["review"].get("decision") == "approve" else "record_rejection"


def issue_refund(state: RefundState, config: RunnableConfig) -> RefundState:
    refund_id = f"RF-{uuid.uuid4().hex[:10]}"
    ledger.record(
        {
            "kind": "refund",
            "execution_id": _execution_id(config),
            "claim_id": state["claim_id"],
            "amount": state["claim"]["amount"],
            "refund_id": refund_id,
            "custom_headers": _custom_headers(config),
        }
    )
    return {
        "outcome": "refunded",
        "refund_id": refund_id,
        "messages": [AIMessage(f"Refunded ${state['claim']['amount']} ({refund_id}).")],
    }


def record_rejection(state: RefundState, config: RunnableConfig) -> RefundState:
    notes = state["review"].get("reviewer_notes") or ""
    ledger.record(
        {
            "kind": "rejection",
            "execution_id": _execution_id(config),
            "claim_id": state["claim_id"],
            "reviewer_notes": notes,
            "custom_headers": _custom_headers(config),
        }
    )
    return {
        "outcome": "rejected",
        "messages": [AIMessage(f"Refund rejected. Notes: {notes}")],
    }


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any]:
    graph = StateGraph(RefundState)
    graph.add_node("lookup_claim", lookup_claim)
    graph.add_node("review", review)
    graph.add_node("issue_refund", issue_refund)
    graph.add_node("record_rejection", record_rejection)
    graph.add_edge(START, "lookup_claim")
    graph.add_edge("lookup_claim", "review")
    graph.add_conditional_edges("review", route, ["issue_refund", "record_rejection"])
    graph.add_edge("issue_refund", END)
    graph.add_edge("record_rejection", END)
    return graph.compile(checkpointer=checkpointer)
