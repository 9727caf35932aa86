"""The agent registry: agent names mapped to LangGraph graph factories, read from a TOML file.

The gateway and the orchestrator read only names and descriptions (to list agents and to reject
unknown ones); the sandbox also imports the factories. Format::

    [agents.refund-approval]
    factory = "agents.refund_approval:build_graph"
    description = "Looks up a claim and asks a reviewer before refunding it."

An agent may add a review policy (see shared/domain/policy.py)::

    [agents.sql-ops.policy]
    execute_sql = "medium"
    read_data = "low"
    [agents.sql-ops.tiers]        # optional
    medium = ["approve", "reject"]
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.domain.deadlines import DeadlineRules
from shared.domain.policy import AgentPolicy, PolicyError, parse_policy
from shared.errors import InterlockError
from shared.events import Identifier


class RegistryError(InterlockError):
    """The agents file is missing or invalid: a deployment error, reported at start-up."""


class ReviewRules(BaseModel):
    """Separation of duties, from ``[agents.NAME.review]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    self_approval: bool = True
    """May the principal that invoked an execution decide its suspensions?"""
    approvals_required: int = Field(default=1, ge=1, le=10)
    """Distinct owners who must give the same approving answer before the execution resumes
    (a rejection acts at once)."""
    approvals_required_for: dict[str, int] = Field(default_factory=dict)
    """Per tool: a suspension whose pending actions include this tool needs this many."""
    link_approvals: bool = True
    """May a notification link approve (shared/notifications/action_links.py)? False: only API
    keys approve, and notifications carry no approve links; a link may still reject."""

    def approvals_for(self, tools: list[str]) -> int:
        return max(
            [self.approvals_required, *(self.approvals_required_for.get(t, 1) for t in tools)]
        )


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Identifier
    factory: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``module:callable``; the callable takes a checkpointer and returns a compiled graph (or a
    StateGraph, which the sandbox compiles with the checkpointer)."""
    description: str = ""
    version: str | None = Field(default=None, min_length=1, max_length=64)
    """Overrides the automatic code fingerprint (see services/sandbox/fingerprint.py)."""
    compatible_with: list[str] = Field(default_factory=list)
    """Fingerprints (or versions) whose suspensions this version may resume."""
    policy: AgentPolicy | None = None
    """The review policy from ``[agents.NAME.policy]`` / ``.tiers``; None: the factory alone
    decides which calls pause."""
    review: ReviewRules = Field(default_factory=ReviewRules)
    deadlines: DeadlineRules = Field(default_factory=DeadlineRules)
    """``[agents.NAME.deadlines]``: remind, escalate, expire (48 h and cancel by default)."""


class AgentRegistry:
    def __init__(self, specs: list[AgentSpec]) -> None:
        self._specs = {spec.name: spec for spec in specs}

    def get(self, name: str) -> AgentSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def all(self) -> list[AgentSpec]:
        return [self._specs[name] for name in self.names()]


def load_registry(path: Path) -> AgentRegistry:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RegistryError(f"cannot read agents file {path}: {exc}") from exc
    entries = data.get("agents", {})
    if not isinstance(entries, dict):
        raise RegistryError(f"{path}: [agents] must be a table of agent tables")
    try:
        specs = [_spec(name, body) for name, body in entries.items()]
    except (TypeError, ValidationError) as exc:
        raise RegistryError(f"{path}: invalid agent entry: {exc}") from exc
    except PolicyError as exc:
        raise RegistryError(f"{path}: invalid review policy: {exc}") from exc
    return AgentRegistry(specs)


def _spec(name: str, body: Any) -> AgentSpec:
    if not isinstance(body, dict):
        raise TypeError(f"[agents.{name}] must be a table")
    fields = dict(body)
    policy, tiers = fields.pop("policy", None), fields.pop("tiers", None)
    if policy is None and tiers is not None:
        # Tiers alone change nothing; more likely the [policy] table is misspelt or missing.
        raise PolicyError(f"agent {name!r}: [tiers] is set but there is no [policy] table")
    parsed = None if policy is None else parse_policy(name, policy, tiers)
    return AgentSpec(name=name, policy=parsed, **fields)
