"""What a suspension asks of a reviewer, read from the pending interrupts and the agent's graph.

- ``HumanInTheLoopMiddleware`` in batched mode interrupts with ``{"action_requests": [...],
  "review_configs": [...]}``: one action per gated tool call, each with its allowed decisions.
- In per-call mode each gated call is its own interrupt, ``{"type": "tool_approval", ...}``; its
  allowed decisions are the middleware's ``interrupt_on`` entry for the tool.
- LangGraph's ``HumanInterrupt`` (Agent Inbox's protocol), a list of requests or one: each an
  action whose allowed decisions are the ``HumanResponse`` types its ``config`` allows
  (shared/domain/human_interrupt.py).
- Anything else is the agent's own ``interrupt(...)``: one decision, from its
  ``allowed_decisions`` if it declares them; otherwise any value (checked against the
  ``answer_schema`` it may declare), which ``interrupt()`` returns as sent.

The tools' argument schemas (the schema the model sees) go along, so the gateway can check an
edit's args, and so do all the tools' policies, so it can refuse an edit that renames a call to a
tool with a stricter one.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from pydantic import BaseModel

from shared.domain.human_interrupt import requests_of
from shared.events import ActionReview, InterruptReview, PendingInterrupt, ToolRule

ALL_DECISIONS = ["approve", "edit", "reject", "respond"]


def _hitl_middleware(graph: Pregel[Any, Any, Any, Any]) -> HumanInTheLoopMiddleware | None:
    for node in graph.nodes.values():
        owner = getattr(getattr(node.bound, "func", None), "__self__", None)
        if isinstance(owner, HumanInTheLoopMiddleware):
            return owner
    return None


def _schema_of(tool: Any) -> dict[str, Any] | None:
    schema = getattr(tool, "tool_call_schema", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema if isinstance(schema, dict) else None


def tool_rules(graph: Pregel[Any, Any, Any, Any]) -> dict[str, ToolRule]:
    """Every tool of the graph's ToolNodes with its review policy and argument schema."""
    middleware = _hitl_middleware(graph)
    interrupt_on: dict[str, Any] = dict(middleware.interrupt_on) if middleware else {}
    rules: dict[str, ToolRule] = {}
    for node in graph.nodes.values():
        if not isinstance(node.bound, ToolNode):
            continue
        for name, tool in node.bound.tools_by_name.items():
            config = interrupt_on.get(name)
            allowed = list(config["allowed_decisions"]) if config else None
            rules[name] = ToolRule(allowed_decisions=allowed, args_schema=_schema_of(tool))
    return rules


def interrupt_reviews(
    interrupts: list[PendingInterrupt], tools: dict[str, ToolRule]
) -> list[InterruptReview]:
    return [_review(interrupt, tools) for interrupt in interrupts]


def _review(interrupt: PendingInterrupt, tools: dict[str, ToolRule]) -> InterruptReview:
    value = interrupt.value
    if isinstance(value, dict) and "action_requests" in value and "review_configs" in value:
        allowed_by_name = {
            c["action_name"]: list(c["allowed_decisions"]) for c in value["review_configs"]
        }
        actions = [
            ActionReview(
                name=request["name"],
                args=dict(request.get("args", {})),
                description=request.get("description"),
                allowed_decisions=allowed_by_name.get(request["name"], ALL_DECISIONS),
                args_schema=_args_schema(tools, request["name"]),
            )
            for request in value["action_requests"]
        ]
        return InterruptReview(
            interrupt_id=interrupt.interrupt_id, kind="actions", mode="batched", actions=actions
        )
    if isinstance(value, dict) and value.get("type") == "tool_approval":
        rule = tools.get(value["name"])
        allowed = rule.allowed_decisions if rule and rule.allowed_decisions else ALL_DECISIONS
        action = ActionReview(
            name=value["name"],
            args=dict(value.get("args", {})),
            description=value.get("description"),
            allowed_decisions=allowed,
            args_schema=_args_schema(tools, value["name"]),
        )
        return InterruptReview(
            interrupt_id=interrupt.interrupt_id, kind="actions", mode="per_call", actions=[action]
        )
    requests = requests_of(value)
    if requests is not None:
        return InterruptReview(
            interrupt_id=interrupt.interrupt_id,
            kind="human_interrupt",
            actions=[
                ActionReview(
                    name=r.action,
                    args=r.args,
                    description=r.description,
                    allowed_decisions=r.allowed,
                    args_schema=_args_schema(tools, r.action),
                )
                for r in requests
            ],
        )
    declared = value.get("allowed_decisions") if isinstance(value, dict) else None
    allowed_words = (
        [d for d in declared if isinstance(d, str) and d.strip()]
        if isinstance(declared, list)
        else []
    )
    schema = value.get("answer_schema") if isinstance(value, dict) else None
    return InterruptReview(
        interrupt_id=interrupt.interrupt_id,
        kind="decision",
        allowed_decisions=allowed_words,
        answer_schema=schema if isinstance(schema, dict) and not allowed_words else None,
    )


def _args_schema(tools: dict[str, ToolRule], name: str) -> dict[str, Any] | None:
    rule = tools.get(name)
    return rule.args_schema if rule else None
