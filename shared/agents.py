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
from shared.langgraph_project import (
    AGENTS_TOML,
    LANGGRAPH_JSON,
    Project,
    ProjectError,
    ProjectGraph,
    read_project,
)


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
    factory: str = Field(pattern=r"^(?:[A-Za-z_][\w.]*|[^:]+\.py):[A-Za-z_]\w*$")
    """``module:attribute`` or ``./file.py:attribute`` (relative to ``folder``): a compiled
    graph, a StateGraph, or a factory (services/sandbox/runner.py, ``GraphCache``)."""
    folder: Path | None = None
    """The folder of the file that declared it: a file path resolves against it, and the
    sandbox imports the agent's code from it (with the project's ``dependencies``)."""
    import_paths: list[Path] = Field(default_factory=list)
    """Folders put on the import path before the agent is imported (no PYTHONPATH needed)."""
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
    def __init__(self, specs: list[AgentSpec], env: dict[str, str] | None = None) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self.env = dict(env or {})
        """Variables the agents run with (``langgraph.json``'s ``env``): the sandbox sets those
        its own environment does not."""

    def get(self, name: str) -> AgentSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def all(self) -> list[AgentSpec]:
        return [self._specs[name] for name in self.names()]


def load_registry(path: Path) -> AgentRegistry:
    """The agents of ``path``: an ``agents.toml``, with the ``langgraph.json`` beside it if there
    is one, or a ``langgraph.json``, with the ``agents.toml`` beside it if there is one
    (shared/langgraph_project.py)."""
    if path.suffix == ".json":
        project_file, toml = path, path.parent / AGENTS_TOML
        entries = _toml_entries(toml) if toml.is_file() else {}
    else:
        project_file, toml = path.parent / LANGGRAPH_JSON, path
        entries = _toml_entries(toml)
    folder = toml.resolve().parent
    try:
        specs = {name: _spec(name, body, folder) for name, body in entries.items()}
    except (TypeError, ValidationError) as exc:
        raise RegistryError(f"{toml}: invalid agent entry: {exc}") from exc
    except PolicyError as exc:
        raise RegistryError(f"{toml}: invalid review policy: {exc}") from exc
    env: dict[str, str] = {}
    if project_file.is_file():
        try:
            project = read_project(project_file)
        except ProjectError as exc:
            raise RegistryError(str(exc)) from exc
        for graph in project.graphs:
            specs[graph.name] = _with_graph(specs.get(graph.name), graph, project, toml)
        env = project.env
    orphans = [name for name, spec in specs.items() if spec.factory == PROJECT_GRAPH]
    if orphans:
        raise RegistryError(
            f"{toml}: [agents.{orphans[0]}] has no 'factory', and no graph of"
            f" {project_file} is named {orphans[0]!r}"
        )
    return AgentRegistry(list(specs.values()), env=env)


def _toml_entries(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RegistryError(f"cannot read agents file {path}: {exc}") from exc
    entries = data.get("agents", {})
    if not isinstance(entries, dict):
        raise RegistryError(f"{path}: [agents] must be a table of agent tables")
    return entries


def _with_graph(
    declared: AgentSpec | None, graph: ProjectGraph, project: Project, toml: Path
) -> AgentSpec:
    """A graph of langgraph.json as an agent, with what agents.toml says of it (its rules)."""
    where = dict(folder=project.folder, import_paths=[project.folder, *project.dependencies])
    if declared is None:
        try:
            return AgentSpec(
                name=graph.name, factory=graph.factory, description=graph.description, **where
            )
        except ValidationError as exc:
            raise RegistryError(f"langgraph.json: graph {graph.name!r}: {exc}") from exc
    if declared.factory != PROJECT_GRAPH:
        raise RegistryError(
            f"{toml}: [agents.{graph.name}] sets a factory, but langgraph.json defines that graph;"
            " leave 'factory' out of the table (it keeps the rules only)"
        )
    return declared.model_copy(
        update={
            "factory": graph.factory,
            "description": declared.description or graph.description,
            **where,
        }
    )


PROJECT_GRAPH = "langgraph.json:graph"
"""The factory of a table that only adds rules to a graph langgraph.json defines."""


def _spec(name: str, body: Any, folder: Path) -> AgentSpec:
    if not isinstance(body, dict):
        raise TypeError(f"[agents.{name}] must be a table")
    fields = {"factory": PROJECT_GRAPH, "folder": folder, **body}
    policy, tiers = fields.pop("policy", None), fields.pop("tiers", None)
    if policy is None and tiers is not None:
        # Tiers alone change nothing; more likely the [policy] table is misspelt or missing.
        raise PolicyError(f"agent {name!r}: [tiers] is set but there is no [policy] table")
    parsed = None if policy is None else parse_policy(name, policy, tiers)
    return AgentSpec(name=name, policy=parsed, **fields)
