"""A claims assistant for chat UIs: a graph that streams the way UIs read streams.

The parent graph reports its progress with LangGraph's ``get_stream_writer()`` (``custom``
stream mode) and hands the conversation to a LangChain ``create_agent`` agent, run as a
**subgraph** (its events come namespaced with ``stream_subgraphs``). The agent looks the claim
up (a tool that reports its progress too), then asks to issue the refund, which a reviewer
approves or rejects (``HumanInTheLoopMiddleware``), then answers.

Two registered agents share this module: ``claims-assistant``'s model answers each turn in one
message, as a model that does not stream tokens does (UIs get each whole message: the tool
call, the tool's result, the answer); ``claims-assistant-streaming``'s model streams its
answers token by token. A message without "refund" or "claim" is answered at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.messages import AIMessageChunk, BaseMessage, ToolCallChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agents.fake_model import Call, Conversation, ScriptedChatModel, reply

REFUNDS = {"CLM-4821": 240}


@tool
def lookup_claim(claim_id: str) -> str:
    """Look a claim up."""
    get_stream_writer()({"progress": f"looking up {claim_id}"})
    amount = REFUNDS.get(claim_id, 90)
    return f"claim {claim_id}: ${amount}, eligible"


@tool
def issue_refund(claim_id: str) -> str:
    """Issue the refund of a claim (a reviewer approves it first)."""
    return f"refunded claim {claim_id}"


def _claim(text: str) -> str:
    found = re.search(r"\bCLM-\d+\b", text, re.IGNORECASE)
    return found.group(0).upper() if found else "CLM-0001"


def script(conversation: Conversation) -> list[Call]:
    text = conversation.request
    if not re.search(r"\b(refund|claim)", text, re.IGNORECASE):
        return []
    claim = _claim(text)
    if conversation.turn == 0:
        return [Call("lookup_claim", {"claim_id": claim})]
    if conversation.turn == 1:
        return [Call("issue_refund", {"claim_id": claim})]
    return []


class StreamingScriptedChatModel(ScriptedChatModel):
    """The scripted model, streaming: each answer's text word by word, a tool call in one
    chunk, as a model provider's stream does."""

    disable_streaming: bool = False

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        answer = reply(self.script, messages)
        calls = [
            ToolCallChunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
            for i, c in enumerate(answer.tool_calls)
        ]
        if calls:
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=calls))
            return
        for word in re.findall(r"\S+\s*", str(answer.content)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                await run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk


def intake(state: MessagesState) -> dict[str, Any]:
    get_stream_writer()({"progress": "reading the request"})
    return {}


def _build(
    model: ScriptedChatModel, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    assistant = create_agent(
        model,
        [lookup_claim, issue_refund],
        system_prompt="You handle refund claims.",
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={"issue_refund": {"allowed_decisions": ["approve", "reject"]}},
                description_prefix="Refund pending review",
            )
        ],
    )
    graph = StateGraph(MessagesState)
    graph.add_node("intake", intake)
    graph.add_node("assistant", assistant)
    graph.add_edge(START, "intake")
    graph.add_edge("intake", "assistant")
    graph.add_edge("assistant", END)
    return graph.compile(checkpointer=checkpointer)


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``claims-assistant``: a model that answers each turn in one message."""
    return _build(ScriptedChatModel(script=script), checkpointer)


def build_graph_streaming(
    checkpointer: BaseCheckpointSaver[Any] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``claims-assistant-streaming``: a model that streams its answers token by token."""
    return _build(StreamingScriptedChatModel(script=script), checkpointer)
