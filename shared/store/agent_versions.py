"""Which version of each agent the sandboxes run now, published by each sandbox at start-up.

The gateway and the orchestrator read it to refuse, synchronously and with both versions named,
a decision that would resume a suspension under different agent code.
"""

from __future__ import annotations

from typing import Protocol

from shared.domain.versions import AgentVersion


class AgentVersions(Protocol):
    async def publish(self, version: AgentVersion) -> None: ...

    async def get(self, agent: str) -> AgentVersion | None: ...
