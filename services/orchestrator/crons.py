"""The cron sweeper: fires every workspace's scheduled runs, each tick once.

Every ``poll`` seconds each orchestrator replica reads the crons due (``next_run_date`` at or
before now) and, for each, the tick to fire (shared/domain/crons.py: the latest due; missed ones
by the cron's catch-up policy). A tick fires for whichever replica inserts its claim first (the
one atomic write FerretDB has); that replica stores the tick's execution, starts it as the
orchestrator starts any request, marks the claim started, and moves the cron's
``next_run_date`` on (a named-field write that a client's change of the schedule survives).

A replica that dies between the claim and the start leaves the claim unstarted: the next sweep
of any replica (``UNSTARTED_AFTER`` later) starts it. The tick's ids are derived from the cron
and the tick (a stateless cron's thread, and so its execution), so starting it again starts the
same run, never a second one. A replica that dies before moving the cron on leaves it due: the
next sweep finds the tick claimed, and moves it on.

Only stateless crons (``crons.create``: a new thread per tick) are fired here; the gateway
refuses a cron on a thread (docs/langgraph-api.md, "Crons"). A tick's thread is kept when the
cron says ``on_run_completed="keep"``; otherwise (LangGraph's default, ``"delete"``) it is made
already expired, and the thread retention sweep (thread_retention.py) deletes it once its run
has ended.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from services.orchestrator.handlers import Orchestrator
from shared import metrics
from shared.background import every
from shared.domain.crons import tick_id, tick_thread_id, tick_to_fire
from shared.domain.execution import RunWebhook, new_pending_execution
from shared.domain.threads import execution_id_for, turn_key
from shared.errors import RejectedMessage
from shared.events import AgentInput, ExecutionRequested, ThreadTurn
from shared.graph_input import InputError, graph_state
from shared.store.crons import CronRecord, Tenant, TickClaim
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)

Clock = Callable[[], datetime]
BATCH = 100
UNSTARTED_AFTER = timedelta(seconds=10)
"""How long a claim may stay unstarted before another replica starts it: far longer than a
start takes (a few store writes), so a live claimer is never raced."""
UNSTARTED_READ_EVERY = UNSTARTED_AFTER / 2
"""How often a replica looks for claims left unstarted: a find every poll (1 s) would double an
idle sweep's store commands for what can only turn up ``UNSTARTED_AFTER`` after a crash."""


class CronSweeper:
    def __init__(
        self,
        *,
        store: Store,
        orchestrator: Orchestrator,
        clock: Clock,
        grace: timedelta = timedelta(seconds=60),
        owner: str | None = None,
    ) -> None:
        self._store = store
        self._orchestrator = orchestrator
        self._clock = clock
        self._grace = grace
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self._unstarted_read_at: datetime | None = None

    async def run_forever(self, poll_seconds: float) -> None:
        await every(poll_seconds, self.sweep, failed="crons.sweep_failed")

    async def sweep(self) -> int:
        """Fire every due tick and start every claim left unstarted; how many this replica
        started."""
        started = 0
        now = self._clock()
        last = self._unstarted_read_at
        if last is None or now - last >= UNSTARTED_READ_EVERY:
            self._unstarted_read_at = now
            for claim in await self._store.crons.unstarted(now - UNSTARTED_AFTER, limit=BATCH):
                tenant = Tenant(claim.project_id, claim.workspace_id)
                cron = await self._store.crons.get(tenant, claim.cron_id)
                started += await self._start(claim, cron)
        for cron in await self._store.crons.due(now, limit=BATCH):
            started += await self._fire(cron, now)
        return started

    async def _fire(self, cron: CronRecord, now: datetime) -> int:
        firing = tick_to_fire(
            cron.schedule,
            cron.next_run_date,
            now,
            timezone=cron.timezone,
            catch_up=cron.catch_up,
            grace=self._grace,
            end_time=cron.end_time,
        )
        started = 0
        if firing.skipped:
            metrics.CRON_TICKS.labels("skipped").inc(firing.skipped)
            log.info("cron.ticks_skipped", cron_id=cron.cron_id, skipped=firing.skipped)
        if firing.tick is not None:
            claim = self._claim_of(cron, firing.tick)
            if await self._store.crons.claim_tick(claim):
                started = await self._start(claim, cron)
        fields: dict[str, object] = {"next_run_date": firing.next_run_date}
        if cron.end_time is not None and firing.next_run_date > cron.end_time:
            fields["enabled"] = False  # its last tick is behind it
        await self._store.crons.set_fields(cron.tenant, cron.cron_id, fields)
        return started

    def _claim_of(self, cron: CronRecord, tick: datetime) -> TickClaim:
        thread_id = tick_thread_id(cron.cron_id, tick)
        return TickClaim(
            claim_id=tick_id(cron.cron_id, tick),
            cron_id=cron.cron_id,
            project_id=cron.project_id,
            workspace_id=cron.workspace_id,
            tick=tick,
            thread_id=thread_id,
            execution_id=execution_id_for(
                cron.project_id, cron.workspace_id, turn_key(thread_id, 1)
            ),
            claimed_by=self._owner,
            claimed_at=self._clock(),
        )

    async def _start(self, claim: TickClaim, cron: CronRecord | None) -> int:
        """Store and start the tick's execution (again, after a crash: the same one)."""
        if cron is None:
            # Deleted between its claim and its start: the tick fires nothing.
            await self._store.crons.mark_started(claim.claim_id)
            return 0
        if not self._orchestrator.knows_agent(cron.assistant_id):
            # Unregistered since the cron was made: the tick starts nothing.
            log.warning("cron.agent_unknown", cron_id=cron.cron_id, agent=cron.assistant_id)
            await self._store.crons.mark_started(claim.claim_id)
            metrics.CRON_TICKS.labels("refused").inc()
            return 0
        try:
            given = AgentInput(state=graph_state(cron.payload.get("input") or {}))
        except InputError as exc:
            # Checked when the cron was made; an agent changed since may refuse it now.
            log.warning("cron.input_refused", cron_id=cron.cron_id, why=exc.detail)
            await self._store.crons.mark_started(claim.claim_id)
            metrics.CRON_TICKS.labels("refused").inc()
            return 0
        turn = ThreadTurn(thread_id=claim.thread_id, turn=1, request_id=claim.claim_id)
        event = ExecutionRequested(
            event_id=f"{claim.execution_id}:requested",
            execution_id=claim.execution_id,
            correlation_id=claim.execution_id,
            project_id=cron.project_id,
            workspace_id=cron.workspace_id,
            agent=cron.assistant_id,
            input=given.model_copy(update={"turn": turn}),
            idempotency_key=turn_key(claim.thread_id, 1),
            requested_by=cron.requested_by,
            requester_identity=cron.requester_identity,
        )
        pending = new_pending_execution(event, None)
        # Its audit trail says which cron and tick started it, in the name of the cron's maker.
        created = pending.audit[0].model_copy(
            update={"reason": f"tick {claim.tick.isoformat()} of cron {cron.cron_id}"}
        )
        pending = pending.model_copy(update={"audit": [created]})
        webhook = cron.payload.get("webhook")
        if isinstance(webhook, str):
            hook = RunWebhook(epoch=1, url=webhook, requested_at=claim.tick)
            pending = pending.model_copy(update={"webhooks": [hook]})
        await self._store.executions.create(pending)
        # Which cron and tick made the thread: what finds a cron's runs (threads.search).
        metadata = {
            **cron.metadata,
            **(cron.payload.get("metadata") or {}),
            "cron_id": cron.cron_id,
            "cron_tick": claim.tick.isoformat(),
        }
        await self._store.threads.create(
            ThreadRecord(
                project_id=cron.project_id,
                workspace_id=cron.workspace_id,
                thread_id=claim.thread_id,
                metadata=metadata,
                turns=1,
                # on_run_completed="delete" (LangGraph's default): due for deletion from the
                # start, which the retention sweep does once the run has ended (a run waiting
                # for a review keeps its thread until it ends).
                expires_at=None if cron.on_run_completed == "keep" else claim.tick,
            )
        )
        try:
            await self._orchestrator.on_scheduled(event)
        except RejectedMessage as refused:
            # Its agent was unregistered since: the tick ends here, its execution with it.
            log.warning("cron.tick_refused", cron_id=cron.cron_id, why=str(refused))
            await self._store.crons.mark_started(claim.claim_id)
            metrics.CRON_TICKS.labels("refused").inc()
            return 0
        await self._store.crons.mark_started(claim.claim_id)
        metrics.CRON_TICKS.labels("fired").inc()
        log.info(
            "cron.fired",
            cron_id=cron.cron_id,
            tick=claim.tick.isoformat(),
            execution_id=claim.execution_id,
        )
        return 1
