"""Agent versions: may a suspension taken under one version of an agent resume under another?"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field


class AgentVersion(BaseModel):
    """The version of an agent that the sandboxes run now."""

    model_config = ConfigDict(frozen=True)

    agent: str
    fingerprint: str
    compatible_with: list[str] = Field(default_factory=list)
    input_keys: list[str] | None = None
    """The keys the graph's input state has (its input schema's), for refusing a misspelt one
    before anything is stored; None where the graph does not say (a functional-API one)."""

    def unknown_input_keys(self, state: Mapping[str, object]) -> list[str]:
        if self.input_keys is None:
            return []
        return sorted(set(state) - set(self.input_keys))

    def accepts(self, suspended_with: str | None) -> bool:
        return (
            suspended_with is None
            or suspended_with == self.fingerprint
            or suspended_with in self.compatible_with
        )
