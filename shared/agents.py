"""The agent registry: agent names mapped to LangGraph graph factories, read from a TOML file.

The gateway and the orchestrator read only names and descriptions (to list agents and to reject
unknown ones); the sandbox also imports the factories. Format::

    [agents.refund-approval]
    factory = "agents.refund_approval:build_graph"
    description = "Looks up a claim and asks a reviewer before refunding it."
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import InterlockError
from shared.events import Identifier


class RegistryError(InterlockError):
    """The agents file is missing or invalid: a deployment error, reported at start-up."""


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
        specs = [AgentSpec(name=name, **body) for name, body in entries.items()]
    except (TypeError, ValidationError) as exc:
        raise RegistryError(f"{path}: invalid agent entry: {exc}") from exc
    return AgentRegistry(specs)
