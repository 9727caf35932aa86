"""Storage ports. The MongoDB, SQLite and in-memory adapters all pass the same contract suite
(tests/contract, the ``store`` fixture)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from shared.domain.execution import Execution, ExecutionStatus
from shared.events import utc_now
from shared.store.agent_versions import AgentVersions
from shared.store.api_keys import ApiKeys
from shared.store.approvals import ApprovalStore
from shared.store.attempts import AttemptLedger
from shared.store.crons import CronStore
from shared.store.erasure import ExecutionErasure
from shared.store.links import SpentLinks
from shared.store.memories import MemoryStore
from shared.store.notifications import NotificationStore
from shared.store.progress import ProgressLog
from shared.store.threads import ThreadStore


@dataclass(frozen=True)
class Page:
    items: list[Execution]
    next_cursor: str | None


async def nothing_to_settle() -> None:
    """The ``Written.settle`` of a store whose compare-and-set is all its write."""


@dataclass(frozen=True)
class Written:
    """A compare-and-set that won (``ExecutionStore.compare_and_set``): what was stored, and the
    writes that follow it."""

    execution: Execution
    settle: Callable[[], Awaitable[None]] = nothing_to_settle
    """Makes the writes that follow the compare-and-set and that no reader needs to be correct
    (the MongoDB store's head, which readers go past while it trails, and the markers of what
    the version stopped waiting on, which every reader checks against the execution). Awaited
    before the caller acknowledges what it is handling, so a crash before them is made good by
    the redelivery, as a crash between the writes of ``replace`` is."""


class ExecutionStore(Protocol):
    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        """Insert unless an execution with this id exists; return the stored one (version 1 when
        created now, else the newest version) and whether it was created now."""
        ...

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        """The newest stored version, or None (no such execution, or another project's). Reads
        are monotonic: never older than a version whose write had returned before the read
        began, so a caller never sees an execution go back.

        With ``min_epoch``, any version of that epoch or later will do: a reader holding a
        command of that epoch (the sandbox, with a dispatch) learns all it needs from it (is the
        command still current, has the execution ended) and never one older than the command;
        with 0, any stored version (a writer that compare-and-sets on it: an older version only
        loses its ``replace``). The MongoDB store then answers from the head alone while the
        head is that new."""
        ...

    async def replace(self, current: Execution, successor: Execution) -> Execution | None:
        """Compare-and-set: store ``successor`` as version ``current.version + 1`` if ``current``
        is still the newest version, and return what was stored (with its version; the
        argument's is ignored). None when another writer stored a successor of ``current``
        first: re-read with ``get``. Of concurrent writers exactly one succeeds.

        ``current`` must be a version this store returned (``create``, ``get`` or ``replace``),
        however old: the MongoDB store does not read it back, it relies on every
        version's id staying taken for good."""
        ...

    async def compare_and_set(self, current: Execution, successor: Execution) -> Written | None:
        """``replace``, returning as soon as the compare-and-set is decided, with the writes
        that follow it left to ``Written.settle``: a handler publishes what the new version
        calls for while they are made (``replace`` is this, then ``settle``)."""
        ...

    async def mark_waiting(self, execution: Execution) -> None:
        """Make again the markers of what ``execution`` (a stored version) waits on, as its
        write made them (the MongoDB store's sweeps and pending-reviews list read markers): a
        writer that died after its compare-and-set may have left one unwritten, and the
        redelivery of what it handled calls this. Nothing for a store that keeps no markers."""
        ...

    async def unchanged_since(self, execution_id: str, version: int) -> bool:
        """Is ``version`` still the execution's newest? One point read on MongoDB (of the
        version after it, normally absent), whatever the head says: a holder of a command that
        version produced (the sandbox, with a dispatch) learns the command is current without
        reading the execution. False when a later version exists. ``version`` must be one this
        store stored (a dispatch names the version that produced it)."""
        ...

    async def due_deadlines(self, now: datetime, *, limit: int = 100) -> list[Execution]:
        """Suspended executions, across projects, with an unfired deadline at or before
        ``now``, earliest first (the deadline sweeper's query)."""
        ...

    async def undelivered_before(self, cutoff: datetime, *, limit: int = 100) -> list[Execution]:
        """Pending executions, across projects, whose request the gateway could not deliver at
        or before ``cutoff`` and no retry delivered since (``undelivered_since``), oldest first."""
        ...

    async def count_live_by_status(self) -> dict[ExecutionStatus, int]:
        """How many executions, across projects, are in each status they have yet to leave
        (pending, running, suspended, resuming; statuses with none are left out): the executions
        and pending-reviews gauges' query. Ended executions are not counted: their number is the
        history's, which no periodic query may read (``interlock_transitions_total`` counts the
        ends as they happen)."""
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

    async def holder(self, execution_id: str, suspension_id: int) -> Claim | None:
        """The claim that holds the suspension's decision, if one was taken: one point read, for
        a consumer that expects the claim to be taken already (the gateway claims before it
        publishes a decision) and claims itself only when it is not."""
        ...


class StepRecord(BaseModel):
    """The cached result of one durable step (see ``interlock.sdk``)."""

    model_config = ConfigDict(frozen=True)

    key: str
    """The step's idempotency key; unique across all executions."""
    execution_id: str
    name: str
    """The step's name, for humans."""
    result: str
    """The step's return value as JSON text, encoded with the step's return type."""
    epoch: int
    """Dispatch epoch of the attempt that ran the step."""
    attempt: int
    """Attempt number within that epoch."""
    created_at: AwareDatetime = Field(default_factory=utc_now, validate_default=True)

    @field_validator("created_at")
    @classmethod
    def _millisecond_precision(cls, value: datetime) -> datetime:
        # BSON dates hold milliseconds in UTC: normalising here makes a record read back from
        # MongoDB equal to the one that was written.
        return value.astimezone(UTC).replace(microsecond=value.microsecond // 1000 * 1000)


class StepStore(Protocol):
    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        """All of an execution's steps, keyed by key, in one query (on FerretDB a scan: runs
        load from their checkpoint's step index instead, services/sandbox/runner.py)."""
        ...

    async def get(self, key: str) -> StepRecord | None:
        """One step by its key."""
        ...

    async def put(self, record: StepRecord) -> StepRecord:
        """Insert unless a step with this key exists; return the stored record. The first
        writer wins: of concurrent puts of one key every caller gets the same record, and a
        stored record is never overwritten."""
        ...


class Store(Protocol):
    """Everything a service needs from the database, created and closed in its lifespan."""

    @property
    def executions(self) -> ExecutionStore: ...

    @property
    def decisions(self) -> DecisionClaims: ...

    @property
    def steps(self) -> StepStore: ...

    @property
    def attempts(self) -> AttemptLedger: ...

    @property
    def agent_versions(self) -> AgentVersions: ...

    @property
    def api_keys(self) -> ApiKeys: ...

    @property
    def approvals(self) -> ApprovalStore: ...

    @property
    def spent_links(self) -> SpentLinks: ...

    @property
    def progress(self) -> ProgressLog: ...

    @property
    def notifications(self) -> NotificationStore: ...

    @property
    def threads(self) -> ThreadStore: ...

    @property
    def memories(self) -> MemoryStore: ...

    @property
    def crons(self) -> CronStore: ...

    @property
    def erasure(self) -> ExecutionErasure: ...

    async def ensure_indexes(self) -> None: ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...
