"""Turn graph state and interrupt values into plain JSON values for events and storage."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def message_to_json(message: BaseMessage) -> dict[str, Any]:
    """The message as LangChain serializes it (``type``, ``id``, ``content`` text or blocks,
    ``name``, ``tool_calls``...), which LangGraph's clients and UIs read, with Interlock's
    ``role`` beside ``type`` for the native API's readers."""
    # JSON mode's dump is JSON already: walking it again cost as much as the dump.
    data: dict[str, Any] = message.model_dump(mode="json")
    data["role"] = ROLES.get(message.type, message.type)
    return data


_PLAIN = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    # Exact types first: a conversation's state is mostly plain lists, dicts and strings, and
    # isinstance against the abstract Mapping is the slowest check here.
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list:
        return [to_jsonable(v) for v in value]
    if kind is dict:
        return {k if type(k) is str else str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, BaseMessage):
        return message_to_json(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return repr(value)
