"""What an agent author imports: durable steps and the review policy a factory receives.

An agent is a LangGraph graph factory named in ``agents.toml``: ``build_graph(checkpointer)``,
or ``build_graph(checkpointer, *, policy)`` for an agent with a ``[policy]`` table, whose
:class:`AgentPolicy` gives each tool the decisions a reviewer may take (``interrupt_on`` feeds
LangChain's ``HumanInTheLoopMiddleware``). Side effects go in durable steps, which run once per
execution however often the node runs again::

    from interlock.sdk import durable_step

    @durable_step
    def send_email(to: str, body: str, idempotency_key: str = "") -> str: ...

Only the names in ``__all__`` are the API. The modules beginning with ``_`` are private, and
:mod:`interlock.sdk.runtime` is the sandbox's side (binding a step run), not agent code's.
docs/durable-steps.md explains the step keys; agents/ holds examples.
"""

from __future__ import annotations

from interlock.sdk._errors import NoStepRun, StepError, StepResultTooLarge
from interlock.sdk._steps import current_idempotency_key, durable_step, run_step, run_step_sync
from shared.domain.policy import (
    DECISION_TYPES,
    DEFAULT_TIERS,
    AgentPolicy,
    Decisions,
    DecisionType,
    Description,
    PolicyError,
    ToolPolicy,
    parse_policy,
)

__all__ = [
    "DECISION_TYPES",
    "DEFAULT_TIERS",
    "AgentPolicy",
    "DecisionType",
    "Decisions",
    "Description",
    "NoStepRun",
    "PolicyError",
    "StepError",
    "StepResultTooLarge",
    "ToolPolicy",
    "current_idempotency_key",
    "durable_step",
    "parse_policy",
    "run_step",
    "run_step_sync",
]
