"""An execution's input as LangGraph takes it: the graph's input state, any keys, with its
``messages`` in every form LangChain and its clients send (``{"role" | "type", "content"}``
with text or content blocks, ``[role, content]`` pairs, bare strings, ids, names, tool calls).

The messages are checked and stored in LangChain's own serialized form (``type``, ``content``,
``id``...), so what the graph receives and what the views show is what LangGraph would give.
Interlock keeps two refusals LangGraph does not make: an empty ``messages`` list and a message
with no text, since either would start a run on nothing anyone asked for. Pure, no I/O: the
gateway checks here before it stores or publishes anything."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages


class InputError(ValueError):
    """The input cannot start a run: a 400 ``problem_type`` with the exact reason."""

    def __init__(self, problem_type: str, detail: str) -> None:
        super().__init__(detail)
        self.problem_type = problem_type
        self.detail = detail


def graph_state(value: Any, *, where: str = "input") -> dict[str, Any]:
    """``value`` checked as a graph's input state, its messages in LangChain's form."""
    if not isinstance(value, dict) or not value:
        raise InputError(
            "invalid-input",
            f"{where}: send the graph's input state, an object with at least one key"
            ' (e.g. {"messages": [{"role": "user", "content": "..."}]})',
        )
    state = dict(value)
    if "messages" in state:
        state["messages"] = messages_of(state["messages"], where=f"{where}.messages")
    return state


def messages_of(value: Any, *, where: str) -> list[dict[str, Any]]:
    """A list of messages in any of LangChain's forms, as LangChain serializes messages."""
    listed = [value] if isinstance(value, str | dict) else value
    if not isinstance(listed, list):
        raise InputError("invalid-input", f"{where}: send a list of messages")
    if not listed:
        raise InputError(
            "empty-messages", f"{where} is empty: send at least one message with some text"
        )
    return [_message(item, f"{where}.{index}") for index, item in enumerate(listed)]


def _message(item: Any, where: str) -> dict[str, Any]:
    try:
        (message,) = convert_to_messages([item])
    # What LangChain raises for input it cannot read (measured: an unknown role is a
    # ValueError, a tool message without tool_call_id a KeyError, a number NotImplementedError):
    # the client's mistake, a 400, never a 500.
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        reason = str(exc).split("\n", 1)[0]
        if isinstance(exc, KeyError):
            reason = f"missing {reason}"
        raise InputError("invalid-input", f"{where}: not a message: {reason}") from exc
    if not _has_text(message):
        raise InputError("blank-message", f"{where} has no text: every message needs some")
    return message.model_dump(mode="json")


def _has_text(message: BaseMessage) -> bool:
    """Text, a non-text block (an image, a file) or a tool call all count as something said."""
    if getattr(message, "tool_calls", None):
        return True
    content = message.content
    if isinstance(content, str):
        return bool(content.strip())
    for block in content:
        if isinstance(block, str) and block.strip():
            return True
        if isinstance(block, dict) and (
            block.get("type") != "text" or str(block.get("text", "")).strip()
        ):
            return True
    return False
