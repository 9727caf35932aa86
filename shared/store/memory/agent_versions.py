"""In-memory adapter of shared/store/agent_versions.py."""

from __future__ import annotations

from shared.domain.descriptions import AgentDescription
from shared.domain.versions import AgentVersion


class InMemoryAgentVersions:
    def __init__(self) -> None:
        self._versions: dict[str, AgentVersion] = {}
        self._load_errors: dict[str, str] = {}
        self._descriptions: dict[str, AgentDescription] = {}

    async def publish(
        self, version: AgentVersion, description: AgentDescription | None = None
    ) -> None:
        self._versions[version.agent] = version
        if description is None:
            self._descriptions.pop(version.agent, None)
        else:
            self._descriptions[version.agent] = description
        self._load_errors.pop(version.agent, None)

    async def report_unloadable(self, agent: str, reason: str) -> None:
        self._load_errors[agent] = reason

    async def get(self, agent: str) -> AgentVersion | None:
        return self._versions.get(agent)

    async def description(self, agent: str) -> AgentDescription | None:
        return self._descriptions.get(agent)

    async def unloadable(self) -> dict[str, str]:
        return dict(self._load_errors)
