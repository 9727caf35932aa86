"""The ``messages-tuple`` and ``messages`` stream modes, from a run's progress entries: each
message a node produced, whole when the model did not stream it (the AI message with its tool
calls, each tool's result, the final answer), as tokens when it did, as LangGraph's ``messages``
mode emits them. Pure.

- ``messages-tuple``: ``[message, metadata]`` per whole message, ``[chunk, metadata]`` per batch
  of tokens (an ``AIMessageChunk`` with the message's id, so a client joins the chunks into the
  message the state shows afterwards);
- ``messages``: ``messages/metadata`` when a message appears, ``messages/partial`` with the text
  so far per batch of tokens, ``messages/complete`` for a whole message, or for a streamed one
  once its node finished; never namespaced (LangGraph's server names them so with subgraphs
  too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Emitted = list[tuple[str, Any]]
"""``(event name, data)`` pairs, in order, before the stream names and numbers them."""

MESSAGE_FIELDS: dict[str, Any] = {
    "content": "",
    "additional_kwargs": {},
    "response_metadata": {},
    "type": "ai",
    "name": None,
    "id": None,
    "tool_calls": [],
    "invalid_tool_calls": [],
    "usage_metadata": None,
}
"""An AI message's fields as LangChain serializes it (what LangGraph's server sends)."""


def as_langchain(message: dict[str, Any]) -> dict[str, Any]:
    """A message of the progress log as LangGraph sends it: without Interlock's ``role``."""
    return {k: v for k, v in message.items() if k != "role"}


@dataclass
class MessageModes:
    """The messages a run streams, for the modes asked. ``metadata`` makes a message's metadata
    from its node and namespace."""

    modes: frozenset[str]
    metadata: Callable[[str | None, str], dict[str, Any]]
    fallback_id: Callable[[], str]
    """An id for streamed tokens that came without one (a sandbox of the release before)."""
    open_by_node: dict[tuple[str, str | None], str] = field(default_factory=dict)
    """(namespace, node) -> the id of its message still streaming."""
    streamed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Message id -> the message so far, for the ``messages`` mode (text and tool calls)."""

    @property
    def wanted(self) -> bool:
        return bool(self.modes & {"messages", "messages-tuple"})

    def message(self, data: dict[str, Any], suffix: str) -> Emitted:
        """A whole message a node produced (an entry without it was too big to carry)."""
        message = data.get("message")
        if not isinstance(message, dict):
            return []
        message = as_langchain(message)
        metadata = self.metadata(data.get("node"), str(data.get("ns", "")))
        emitted: Emitted = []
        if "messages-tuple" in self.modes:
            emitted.append((f"messages{suffix}", [message, metadata]))
        if "messages" in self.modes:
            key = str(message.get("id") or self.fallback_id())
            emitted.append(("messages/metadata", {key: {"metadata": metadata}}))
            emitted.append(("messages/complete", [message]))
        return emitted

    def tokens(self, data: dict[str, Any], suffix: str) -> Emitted:
        """A batch of streamed tokens (and tool-call chunks) of one message."""
        node, ns = data.get("node"), str(data.get("ns", ""))
        message_id = str(data.get("id") or self.open_by_node.get((ns, node)) or self.fallback_id())
        text = str(data.get("text", ""))
        calls = data.get("tool_call_chunks") or []
        metadata = self.metadata(node, ns)
        emitted: Emitted = []
        if "messages-tuple" in self.modes:
            chunk = {
                **MESSAGE_FIELDS,
                "type": "AIMessageChunk",
                "content": text,
                "id": message_id,
                "tool_call_chunks": calls,
            }
            emitted.append((f"messages{suffix}", [chunk, metadata]))
        if "messages" in self.modes:
            so_far = self.streamed.get(message_id)
            if so_far is None:
                so_far = {**MESSAGE_FIELDS, "id": message_id}
                self.streamed[message_id] = so_far
                emitted.append(("messages/metadata", {message_id: {"metadata": metadata}}))
            so_far["content"] = str(so_far["content"]) + text
            if calls:
                so_far["tool_call_chunks"] = [*so_far.get("tool_call_chunks", []), *calls]
            emitted.append(("messages/partial", [dict(so_far)]))
        self.open_by_node[(ns, node)] = message_id
        return emitted

    def node_done(self, ns: str, node: str | None) -> Emitted:
        """The node finished: its streamed message is complete."""
        message_id = self.open_by_node.pop((ns, node), None)
        if message_id is None:
            return []
        message = self.streamed.pop(message_id, None)
        if message is None or "messages" not in self.modes:
            return []
        return [("messages/complete", [message])]

    def all_done(self) -> Emitted:
        """The run stopped: every message still streaming is complete."""
        return [done for ns, node in list(self.open_by_node) for done in self.node_done(ns, node)]
