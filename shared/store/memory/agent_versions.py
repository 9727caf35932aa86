"""In-memory adapter of shared/store/agent_versions.py."""

from __future__ import annotations

from shared.domain.versions import AgentVersion


class InMemoryAgentVersions:
    def __init__(self) -> None:
        self._versions: dict[str, AgentVersion] = {}

    async def publish(self, version: AgentVersion) -> None:
        self._versions[version.agent] = version

    async def get(self, agent: str) -> AgentVersion | None:
        return self._versions.get(agent)
