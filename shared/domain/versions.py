"""Agent versions: may a suspension taken under one version of an agent resume under another?"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AgentVersion(BaseModel):
    """The version of an agent that the sandboxes run now."""

    model_config = ConfigDict(frozen=True)

    agent: str
    fingerprint: str
    compatible_with: list[str] = Field(default_factory=list)

    def accepts(self, suspended_with: str | None) -> bool:
        return (
            suspended_with is None
            or suspended_with == self.fingerprint
            or suspended_with in self.compatible_with
        )
