"""What a durable step raises when it is used in a way that cannot be made durable."""

from __future__ import annotations

from shared.errors import InterlockError

__all__ = ["NoStepRun", "StepError", "StepResultTooLarge"]


class StepError(InterlockError):
    """A durable step was used in a way that cannot be made durable."""


class StepResultTooLarge(StepError):
    """A step's encoded result exceeds the run's budget; nothing was stored."""


class NoStepRun(StepError):
    """No step identity here: outside a LangGraph node without ``key=``, or
    ``current_idempotency_key()`` outside a running step."""
