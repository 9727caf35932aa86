"""Scheduled runs, stored: each cron of a workspace, and the claim of each tick fired.

A cron belongs to one tenant, a (project, workspace); every operation but the sweep's names it,
and nothing of another tenant is read, listed or changed. The sweep (``due``) reads across
tenants: the orchestrators fire every workspace's crons.

FerretDB has no atomic conditional update, so no write here depends on what another writer
did, but one: a tick is fired by whoever inserts its claim first (``claim_tick``, an insert
under the tick's id), which is what makes a tick fire once however many orchestrators sweep.
Everything else is a write of named fields (``set_fields``), so the sweep moving a cron's
``next_run_date`` on never undoes a client's change of its schedule, nor the reverse.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from shared.domain.crons import CatchUp
from shared.events import BusyThreadPolicy, utc_now
from shared.store.memories import Tenant, to_the_millisecond

__all__ = [
    "CronRecord", "CronSort", "CronStore", "Tenant", "TickClaim", "checked_fields", "sort_key"
]  # fmt: skip

CronSort = Literal["cron_id", "assistant_id", "thread_id", "next_run_date", "created_at"]
CRON_FIELDS_SET = frozenset(
    {"schedule", "timezone", "end_time", "enabled", "payload", "metadata", "next_run_date",
     "on_run_completed", "catch_up", "updated_at"}
)  # fmt: skip
"""The fields ``set_fields`` may write: never the tenant, the id, the thread or the creator."""


class CronRecord(BaseModel):
    """One cron, as LangGraph's API shows it, with the tenant and the creator beside."""

    model_config = ConfigDict(frozen=True)

    cron_id: str
    project_id: str
    workspace_id: str
    assistant_id: str
    thread_id: str | None = None
    """The thread every tick runs on; None: a new thread per tick (``crons.create``)."""
    schedule: str
    timezone: str | None = None
    end_time: AwareDatetime | None = None
    enabled: bool = True
    payload: dict[str, Any] = Field(default_factory=dict)
    """The run each tick starts: the body of ``runs.create`` (``input``, ``webhook``,
    ``multitask_strategy``...), as given."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    on_run_completed: Literal["delete", "keep"] | None = None
    catch_up: CatchUp = "run_once"
    multitask_strategy: BusyThreadPolicy = "enqueue"
    """What a tick does when its thread is busy (a thread cron's runs)."""
    requested_by: str
    """The key that created the cron (its label): each tick's run is requested in its name."""
    requester_identity: str | None = None
    """Who created it, for separation of duties (shared/domain/principals.py)."""
    next_run_date: AwareDatetime
    """The cron's first tick not yet fired."""
    created_at: AwareDatetime = Field(default_factory=utc_now, validate_default=True)
    updated_at: AwareDatetime = Field(default_factory=utc_now, validate_default=True)

    @field_validator("end_time", "next_run_date", "created_at", "updated_at")
    @classmethod
    def _millisecond_precision(cls, value: datetime | None) -> datetime | None:
        # A BSON date holds milliseconds: a cron reads back from every adapter as written.
        return None if value is None else to_the_millisecond(value)

    @property
    def tenant(self) -> Tenant:
        return Tenant(self.project_id, self.workspace_id)


class TickClaim(BaseModel):
    """One tick of one cron, fired: who claimed it, the execution it starts, and whether that
    execution was started (a claim left unstarted by an orchestrator that died is started by
    the next sweep, with the same execution id)."""

    model_config = ConfigDict(frozen=True)

    claim_id: str
    """``shared.domain.crons.tick_id``: the cron and the tick."""
    cron_id: str
    project_id: str
    workspace_id: str
    tick: AwareDatetime
    execution_id: str | None = None
    """A stateless cron's tick's execution (derived from the tick); None for a cron on a thread,
    whose tick is the thread's next turn, known once it starts (its request id is the claim's)."""
    thread_id: str
    claimed_by: str
    claimed_at: AwareDatetime = Field(default_factory=utc_now, validate_default=True)
    started: bool = False

    @field_validator("tick", "claimed_at")
    @classmethod
    def _millisecond_precision(cls, value: datetime) -> datetime:
        return to_the_millisecond(value)


def checked_fields(fields: dict[str, Any]) -> None:
    """Raise ValueError unless every field is one ``set_fields`` may write."""
    refused = sorted(set(fields) - CRON_FIELDS_SET)
    if refused:
        raise ValueError(f"a cron's {', '.join(refused)} cannot be changed")


def sort_key(cron: CronRecord, sort_by: CronSort) -> tuple[Any, str]:
    """The order of every adapter's search: the field (a thread-less cron's thread first, as
    ``""``), then the cron's id, both ascending or both descending."""
    value = getattr(cron, sort_by)
    return ("" if value is None else value), cron.cron_id


class CronStore(Protocol):
    async def create(self, cron: CronRecord) -> bool:
        """Store a new cron; False when its id is taken (nothing written)."""
        ...

    async def get(self, tenant: Tenant, cron_id: str) -> CronRecord | None: ...

    async def set_fields(self, tenant: Tenant, cron_id: str, fields: dict[str, Any]) -> bool:
        """Write the named fields of the tenant's cron (only ``CRON_FIELDS_SET``; others are a
        ValueError); False when it has no such cron."""
        ...

    async def delete(self, tenant: Tenant, cron_id: str) -> bool:
        """Delete the cron (its claims are kept, as the record of what it fired)."""
        ...

    async def search(
        self,
        tenant: Tenant,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: CronSort = "created_at",
        descending: bool = True,
    ) -> list[CronRecord]: ...

    async def count(
        self,
        tenant: Tenant,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
    ) -> int: ...

    async def due(self, now: datetime, *, limit: int = 100) -> list[CronRecord]:
        """Enabled crons of every tenant whose ``next_run_date`` is at or before ``now``,
        soonest first."""
        ...

    async def claim_tick(self, claim: TickClaim) -> bool:
        """Insert the tick's claim; False when it is claimed already (by anyone)."""
        ...

    async def mark_started(self, claim_id: str, execution_id: str | None = None) -> None:
        """Say the tick is done with (started, or never to start); with ``execution_id``, the
        execution it started (a thread tick's turn, known only then)."""
        ...

    async def forget_claims(self, claimed_before: datetime, *, limit: int = 100) -> int:
        """Delete up to ``limit`` claims marked started and made before ``claimed_before``, the
        oldest first; how many. A claim is consulted only for a tick at or after its cron's
        ``next_run_date``, which the sweep that claimed the tick moves past it: an old started
        claim records what was fired (so does the audit trail of the run it started)."""
        ...

    async def unstarted(self, claimed_before: datetime, *, limit: int = 100) -> list[TickClaim]:
        """Claims not marked started, made before ``claimed_before``, oldest first."""
        ...

    async def claims_of(
        self, tenant: Tenant, cron_id: str, *, newest: int | None = None
    ) -> Sequence[TickClaim]:
        """The cron's claims, by tick (what it fired); with ``newest``, only that many of the
        latest ticks."""
        ...
