"""LangGraph's ``HumanInterrupt`` and its ``HumanResponse`` list: the protocol of Agent Inbox.
Pure, no I/O.

An agent asks with ``interrupt([request])`` (or one request alone), each request
``{"action_request": {"action", "args"}, "config": {"allow_accept", "allow_edit",
"allow_respond", "allow_ignore"}, "description"}``, and ``interrupt()`` returns the list of
responses it is resumed with, ``[{"type": "accept" | "edit" | "response" | "ignore", "args"}]``,
one per request in order (Agent Inbox answers the first request only, so fewer are accepted).
What each type may carry, as Agent Inbox sends it:

- ``accept``: ``args`` null, or the request's ``action_request`` unchanged (an accept never
  changes what runs: that is an edit, which the request may not allow);
- ``edit``: ``args`` the ``action_request`` with edited ``args`` (the same ``action``);
- ``response``: ``args`` the reviewer's text, not blank;
- ``ignore``: ``args`` null.

A type the request's ``config`` does not allow is refused, naming the ones it allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HUMAN_RESPONSE_TYPES = ("accept", "edit", "response", "ignore")
FLAG_OF_TYPE = {
    "accept": "allow_accept",
    "edit": "allow_edit",
    "response": "allow_respond",
    "ignore": "allow_ignore",
}
"""Which ``config`` flag allows each response type."""


class HumanResponseError(ValueError):
    """The responses do not fit the requests: the exact reason, for a 400."""


@dataclass(frozen=True)
class HumanRequest:
    """One ``HumanInterrupt`` as a reviewer sees it."""

    action: str
    args: dict[str, Any]
    description: str | None
    allowed: list[str]
    """The response types its ``config`` allows, in ``HUMAN_RESPONSE_TYPES`` order."""


def requests_of(value: Any) -> list[HumanRequest] | None:
    """The requests of an interrupt value in the ``HumanInterrupt`` form (a list of them, or
    one alone); None for any other value."""
    listed = value if isinstance(value, list) else [value]
    if not listed or not all(_is_request(item) for item in listed):
        return None
    return [_request(item) for item in listed]


def _is_request(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    action_request, config = item.get("action_request"), item.get("config")
    return (
        isinstance(action_request, dict)
        and isinstance(action_request.get("action"), str)
        and isinstance(action_request.get("args", {}), dict)
        and isinstance(config, dict)
        and all(isinstance(config.get(flag, False), bool) for flag in FLAG_OF_TYPE.values())
        and isinstance(item.get("description"), str | None)
    )


def _request(item: dict[str, Any]) -> HumanRequest:
    action_request, config = item["action_request"], item["config"]
    return HumanRequest(
        action=action_request["action"],
        args=dict(action_request.get("args", {})),
        description=item.get("description"),
        allowed=[t for t in HUMAN_RESPONSE_TYPES if config.get(FLAG_OF_TYPE[t], False)],
    )


@dataclass(frozen=True)
class CheckedResponses:
    types: list[str]
    edits: list[dict[str, Any]]
    """For each edit: the request's position, and its action and args before and after."""


def check_responses(requests: Sequence[HumanRequest], value: Any) -> CheckedResponses:
    """Check a resume value against the requests; raise HumanResponseError saying why not."""
    count = len(requests)
    if not isinstance(value, list) or not value:
        raise HumanResponseError(
            f"resume with a list of HumanResponse, one per request ({count}) in order:"
            ' [{"type": "accept" | "edit" | "response" | "ignore", "args": ...}]'
        )
    if len(value) > count:
        raise HumanResponseError(
            f"{len(value)} responses for {count} request(s): send at most one per request"
        )
    edits = []
    for position, (request, response) in enumerate(zip(requests, value, strict=False), start=1):
        kind = _check_one(position, request, response)
        if kind == "edit":
            edits.append(
                {
                    "position": position,
                    "before": {"name": request.action, "args": request.args},
                    "after": {"name": request.action, "args": response["args"]["args"]},
                }
            )
    return CheckedResponses([r["type"] for r in value], edits)


def _check_one(position: int, request: HumanRequest, response: Any) -> str:
    where = f"response {position} (to {request.action})"
    if not isinstance(response, dict) or not isinstance(response.get("type"), str):
        raise HumanResponseError(f'{where}: send {{"type": ..., "args": ...}}')
    unknown = sorted(set(response) - {"type", "args"})
    if unknown:
        raise HumanResponseError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    kind, args = response["type"], response.get("args")
    if kind not in HUMAN_RESPONSE_TYPES:
        raise HumanResponseError(
            f"{where}: type {kind!r} is not a HumanResponse type"
            f" ({', '.join(HUMAN_RESPONSE_TYPES)})"
        )
    if kind not in request.allowed:
        allowed = ", ".join(request.allowed) or "none"
        raise HumanResponseError(f"{where}: {kind!r} is not allowed here; allowed: {allowed}")
    original = {"action": request.action, "args": request.args}
    if kind == "accept" and args is not None and args != original:
        raise HumanResponseError(
            f"{where}: an accept takes args null or the action_request unchanged; changed args"
            " are an edit"
        )
    if kind == "edit":
        _check_edit(where, request, args)
    if kind == "response" and not (isinstance(args, str) and args.strip()):
        raise HumanResponseError(f"{where}: a response needs args, the reviewer's text")
    if kind == "ignore" and args is not None:
        raise HumanResponseError(f"{where}: an ignore takes args null")
    return str(kind)


def _check_edit(where: str, request: HumanRequest, args: Any) -> None:
    if (
        not isinstance(args, dict)
        or set(args) - {"action", "args"}
        or not isinstance(args.get("args"), dict)
    ):
        raise HumanResponseError(
            f'{where}: an edit takes args {{"action": {request.action!r}, "args": {{...}}}}'
        )
    if args.get("action", request.action) != request.action:
        raise HumanResponseError(
            f"{where}: an edit changes the args of {request.action!r}, not the action"
            f" (got {args.get('action')!r})"
        )
