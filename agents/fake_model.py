"""A scripted chat model for the example agents: deterministic, offline, restart-safe.

The reply is computed from the conversation it is given, not from an iterator: the sandbox
compiles each graph once per process and runs many executions through it, and a resumed or
recovered execution calls the model again with the history from its checkpoint, so a model
with hidden state would answer differently after a restart.

A script maps a ``Conversation`` (the last user message, how many model turns have been taken
since it, the tool results so far) to the tool calls of the next turn; no calls means the final
answer, which lists the tool results. Tool call ids are derived from the position in the
history, so they are stable per execution (the sandbox keys durable tool steps by them).

Set ``INTERLOCK_CHAT_MODEL`` (e.g. ``openai:gpt-4o-mini``) to use a real model instead.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field

CHAT_MODEL_ENV = "INTERLOCK_CHAT_MODEL"


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conversation:
    request: str
    """The last user message."""
    turn: int
    """Model turns already taken since that message (0 on the first call)."""
    results: tuple[str, ...] = ()
    """Contents of the tool messages since that message, in order."""


Script = Callable[[Conversation], Sequence[Call]]


def conversation(messages: Sequence[BaseMessage]) -> Conversation:
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    request = messages[start].text if start >= 0 else ""
    since = messages[start + 1 :]
    return Conversation(
        request=request,
        turn=sum(isinstance(m, AIMessage) for m in since),
        results=tuple(m.text for m in since if isinstance(m, ToolMessage)),
    )


def reply(script: Script, messages: Sequence[BaseMessage]) -> AIMessage:
    calls = script(conversation(messages))
    if not calls:
        results = conversation(messages).results
        return AIMessage(content=("Done. " + " | ".join(results)) if results else "Nothing to do.")
    # Unique within the thread: the number of model turns so far, then the call's position.
    turn = sum(isinstance(m, AIMessage) for m in messages)
    tool_calls = [
        ToolCall(name=call.name, args=dict(call.args), id=f"call_{turn}_{i}", type="tool_call")
        for i, call in enumerate(calls)
    ]
    return AIMessage(content="", tool_calls=tool_calls)


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` answering from a script; tools are accepted and ignored."""

    script: Script
    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    """Unused: replies come from ``script``."""
    disable_streaming: bool = True
    """The parent's streaming path drops tool calls; always answer in one message."""
    latency_seconds: float = 0.0
    """How long each call takes, as a remote model's would: awaited (``asyncio.sleep``) when the
    model is called asynchronously, so other executions run meanwhile."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_seconds:
            time.sleep(self.latency_seconds)
        return ChatResult(generations=[ChatGeneration(message=reply(self.script, messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_seconds:
            await asyncio.sleep(self.latency_seconds)
        return ChatResult(generations=[ChatGeneration(message=reply(self.script, messages))])

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # create_agent binds the tools; the script already knows which ones it calls.
        return self

    @property
    def _llm_type(self) -> str:
        return "interlock-scripted"


def chat_model(script: Script) -> BaseChatModel:
    """The scripted model, or the real one named by ``INTERLOCK_CHAT_MODEL``."""
    configured = os.environ.get(CHAT_MODEL_ENV)
    if configured:
        return init_chat_model(configured)
    return ScriptedChatModel(script=script)
