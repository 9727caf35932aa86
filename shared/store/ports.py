"""Storage ports. The MongoDB adapter and the in-memory fake both pass tests/contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shared.domain.execution import Execution, ExecutionStatus


@dataclass(frozen=True)
class Page:
    items: list[Execution]
    next_cursor: str | None


class ExecutionStore(Protocol):
    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        """Insert unless an execution with this id exists; return the stored one (version 1 when
        created now) and whether it was created now."""
        ...

    async def get(self, project_id: str, execution_id: str) -> Execution | None: ...

    async def replace(self, execution: Execution, *, expected_version: int) -> bool:
        """Compare-and-set: store ``execution`` as version ``expected_version + 1`` only if the
        stored version is ``expected_version``. Of concurrent writers exactly one succeeds; the
        others get False (another writer got there first) and must re-read. The store assigns
        version numbers; the ``version`` of the argument is ignored."""
        ...

    async def list(
        self,
        project_id: str,
        workspace_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """Oldest first, ``limit`` at a time; ``cursor`` is a previous page's ``next_cursor``."""
        ...


@dataclass(frozen=True)
class Claim:
    decision_id: str
    payload: str
    """The claiming ``decision.submitted`` event as JSON, so a claim whose event was never
    published can be re-driven."""


class DecisionClaims(Protocol):
    async def claim(self, execution_id: str, suspension_id: int, claim: Claim) -> Claim:
        """Reserve the one decision a suspension may take. Returns the claim that holds it:
        ``claim`` itself if it won (now or in an earlier try with the same decision_id), another
        one if a different decision was first."""
        ...


class SentCommands(Protocol):
    """Which commands have been published, so a redelivered event does not send one again."""

    async def was_sent(self, command_id: str) -> bool: ...

    async def mark_sent(self, command_id: str) -> None:
        """Idempotent: marking a command twice is the same as once."""
        ...


class Store(Protocol):
    """Everything a service needs from the database, created and closed in its lifespan."""

    @property
    def executions(self) -> ExecutionStore: ...

    @property
    def decisions(self) -> DecisionClaims: ...

    @property
    def sent_commands(self) -> SentCommands: ...

    async def ensure_indexes(self) -> None: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
