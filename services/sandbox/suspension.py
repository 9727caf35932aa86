"""From the agent's pending interrupts to what a reviewer sees. Pure.

One interrupt whose value is an object: that object is the ``suspend_context``, and its
``allowed_decisions`` list (if any) constrains the reviewer. Any other value is wrapped as
``{"value": ...}``. Several interrupts at once (parallel nodes): their contexts are listed under
``interrupts`` and the allowed decisions are those every one of them accepts.
"""

from __future__ import annotations

from typing import Any

from shared.events import InterruptReview, PendingInterrupt


def _allowed(value: Any) -> list[str] | None:
    if isinstance(value, dict):
        declared = value.get("allowed_decisions")
        if isinstance(declared, list) and all(isinstance(d, str) for d in declared):
            return [d for d in declared if d.strip()]
    return None


def _context(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {"value": value}


def review_view(
    interrupts: list[PendingInterrupt], reviews: list[InterruptReview] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Return ``(suspend_context, allowed_decisions)`` for a suspension. For tool-call reviews
    the allowed decisions are those every pending action accepts."""
    actions = [a for r in reviews or [] if r.kind == "actions" for a in r.actions]
    if actions:
        context = (
            _context(interrupts[0].value)
            if len(interrupts) == 1
            else {"interrupts": [_context(i.value) for i in interrupts]}
        )
        common = [
            d
            for d in actions[0].allowed_decisions
            if all(d in a.allowed_decisions for a in actions)
        ]
        return context, common
    if len(interrupts) == 1:
        value = interrupts[0].value
        return _context(value), _allowed(value) or []
    contexts = [_context(i.value) for i in interrupts]
    declared = [a for a in (_allowed(i.value) for i in interrupts) if a is not None]
    allowed: list[str] = []
    if declared:
        allowed = [d for d in declared[0] if all(d in other for other in declared[1:])]
    return {"interrupts": contexts}, allowed
