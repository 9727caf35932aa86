"""Tools run by LangGraph's ``ToolNode`` (and so by LangChain ``create_agent``) become durable
steps without the agent author doing anything.

Each tool call is keyed by its tool call id, which the model's message carries and the
checkpoint keeps, so a tool that completed before a crash or an interrupt returns its stored
``ToolMessage`` on replay instead of running again. The wrapper is installed as the outermost
``wrap_tool_call`` of every ``ToolNode`` in the graph, around whatever wrappers middleware set.
A tool that returns a ``Command`` (a state update rather than a message) is not cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from interlock.sdk import run_step, run_step_sync

Execute = Callable[[Any], Any]
AsyncExecute = Callable[[Any], Awaitable[Any]]


class _NotCacheable(Exception):
    """Carries a non-message tool result out of the step, so nothing is cached for it."""

    def __init__(self, result: Any) -> None:
        super().__init__("tool returned a Command")
        self.result = result


def _step_name(request: Any) -> str:
    return f"tool:{request.tool_call['name']}"


def _step_key(request: Any) -> str:
    return f"tool-call:{request.tool_call['id']}"


def _as_message(result: Any) -> ToolMessage:
    if not isinstance(result, ToolMessage):
        raise _NotCacheable(result)
    return result


def durable_tool_call(request: Any, call: Execute) -> Any:
    def once() -> ToolMessage:
        return _as_message(call(request))

    try:
        return run_step_sync(_step_name(request), once, key=_step_key(request))
    except _NotCacheable as passthrough:
        return passthrough.result


async def adurable_tool_call(request: Any, call: AsyncExecute) -> Any:
    async def once() -> ToolMessage:
        return _as_message(await call(request))

    try:
        return await run_step(_step_name(request), once, key=_step_key(request))
    except _NotCacheable as passthrough:
        return passthrough.result


def _durable(node: ToolNode) -> None:
    inner_sync = node._wrap_tool_call
    inner_async = node._awrap_tool_call

    def wrap(request: Any, execute: Execute) -> Any:
        if inner_sync is None:
            return durable_tool_call(request, execute)
        return durable_tool_call(request, lambda r: inner_sync(r, execute))

    async def awrap(request: Any, execute: AsyncExecute) -> Any:
        if inner_async is not None:
            return await adurable_tool_call(request, lambda r: inner_async(r, execute))
        if inner_sync is None:
            return await adurable_tool_call(request, execute)
        # Only a sync middleware wrapper exists: run it in a thread, bridging its execute back
        # to this loop, where the async tool execution lives.
        loop = asyncio.get_running_loop()

        def sync_execute(r: Any) -> Any:
            async def run() -> Any:
                return await execute(r)

            return asyncio.run_coroutine_threadsafe(run(), loop).result()

        async def call(r: Any) -> Any:
            return await asyncio.to_thread(inner_sync, r, sync_execute)

        return await adurable_tool_call(request, call)

    # ToolNode's own slots for wrappers (what create_agent's middleware composes into).
    node._wrap_tool_call = wrap
    node._awrap_tool_call = awrap
    node._interlock_durable = True  # type: ignore[attr-defined]


def make_tools_durable(graph: Pregel[Any, Any, Any, Any]) -> int:
    """Wrap every ToolNode of ``graph`` once; returns how many were wrapped."""
    wrapped = 0
    for node in graph.nodes.values():
        bound = node.bound
        if isinstance(bound, ToolNode) and not getattr(bound, "_interlock_durable", False):
            _durable(bound)
            wrapped += 1
    return wrapped
