"""Which version of each agent the sandboxes run now, published by each sandbox at start-up,
with how its graph looks (for LangGraph's assistants routes), and which agents they cannot load
(with why), for the agents routes and operators.

The gateway reads it to refuse, synchronously and with both versions named, a decision that
would resume a suspension under different agent code. (The orchestrator does not: the sandbox
refuses such a resume itself, services/orchestrator/handlers.py says why that is better there.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Protocol

from shared.domain.decisions import check_agent_version
from shared.domain.descriptions import AgentDescription
from shared.domain.execution import Execution
from shared.domain.versions import AgentVersion


class AgentVersions(Protocol):
    async def publish(
        self, version: AgentVersion, description: AgentDescription | None = None
    ) -> None:
        """The version the sandboxes run now, with how its graph looks (None: not described;
        one described before goes with the version it described); clears a load error reported
        before (the agent loads again)."""
        ...

    async def report_unloadable(self, agent: str, reason: str) -> None:
        """The sandboxes cannot load ``agent``; the version published before is kept (its
        suspensions still belong to it, and a fixed release resumes them)."""
        ...

    async def get(self, agent: str) -> AgentVersion | None:
        """The version alone: a read on the path of runs and decisions, which never carries the
        description along."""
        ...

    async def description(self, agent: str) -> AgentDescription | None:
        """How the current version's graph looks, as published with it (LangGraph's assistants
        routes); None when no version of it was described."""
        ...

    async def unloadable(self) -> dict[str, str]:
        """Every agent the sandboxes last reported they cannot load, with why."""
        ...


class AgentVersionCheck:
    """Refuses early (``AgentVersionChanged``) a decision that would resume a suspension under
    agent code the sandboxes no longer run, reading the current version through a cache of
    ``ttl_seconds`` (0: a read every time).

    The check is advisory: the sandbox is the authority, it compares the suspension's
    fingerprint with the code it actually runs and refuses the resume (services/sandbox/runner.py,
    ``Refused``), and the execution is suspended again. So a cached version may only ever let a
    decision through: letting one through wrongly (code changed within the last ``ttl_seconds``)
    ends in that refusal, a moment later. A refusal is always made on a fresh read, so a
    reverted deployment is believed at once.
    """

    def __init__(
        self,
        versions: AgentVersions,
        *,
        ttl_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._versions = versions
        self._ttl = ttl_seconds
        self._clock = clock
        self._read: dict[str, tuple[float, AgentVersion | None]] = {}

    async def check(self, execution: Execution) -> None:
        suspension = execution.suspension
        if suspension is None or suspension.agent_fingerprint is None:
            return  # nothing to compare (check_agent_version accepts it whatever is current)
        cached = self._read.get(execution.agent)
        if cached is not None and self._clock() - cached[0] < self._ttl:
            current = cached[1]
            if current is None or current.accepts(suspension.agent_fingerprint):
                return
        current = await self._versions.get(execution.agent)
        if self._ttl > 0:
            self._read[execution.agent] = (self._clock(), current)
        check_agent_version(execution, current)

    async def refusing_input(self, agent: str, state: Mapping[str, object]) -> AgentVersion | None:
        """The agent's version, as the sandboxes last published it, when its graph does not take
        some key of ``state``; None when it takes them all, or when no version is known yet
        (the graph then ignores an unknown key, as LangGraph does). As with versions, a refusal
        is made on a fresh read."""
        cached = self._read.get(agent)
        fresh = cached is not None and self._clock() - cached[0] < self._ttl
        if cached is not None and fresh and not (cached[1] and cached[1].unknown_input_keys(state)):
            return None
        current = await self._versions.get(agent)
        if self._ttl > 0:
            self._read[agent] = (self._clock(), current)
        if current is None or not current.unknown_input_keys(state):
            return None
        return current
