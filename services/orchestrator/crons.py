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

A stateless cron's tick (``crons.create``) runs on a thread of its own, derived from the tick.
That thread is kept when the cron says ``on_run_completed="keep"``; otherwise (LangGraph's
default, ``"delete"``) it is made already expired, and the thread retention sweep
(thread_retention.py) deletes it once its run has ended.

A tick of a cron on a thread (``crons.create_for_thread``) is the thread's next turn, planned as
the gateway plans a run's (shared/thread_turns.py) under the cron's busy-thread policy:
``enqueue`` queues it after a turn that is running or waiting for a review, ``reject`` skips the
tick (counted as ``busy``). Its turn's request id is the claim's, so a start cut short between
storing the turn and marking the claim is found by the next sweep and started, not planned
again; a run of the thread that takes the planned turn first has the tick plan again.
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
from shared.domain.execution import Execution, RunWebhook, new_pending_execution, request_of
from shared.domain.threads import (
    MAX_TURN_PROBES,
    ThreadBusy,
    WrongAgent,
    execution_id_for,
    expiry,
    turn_key,
    turn_number,
)
from shared.errors import RejectedMessage
from shared.events import AgentInput, CancelRequested, ExecutionRequested, ThreadTurn
from shared.graph_input import InputError, graph_state
from shared.store.crons import CronRecord, Tenant, TickClaim
from shared.store.ports import Store
from shared.store.threads import ThreadRecord
from shared.thread_turns import ThreadTurns

log = structlog.get_logger(__name__)

Clock = Callable[[], datetime]
BATCH = 100
RACES = 5
"""How often a thread tick's turn is planned again after a run of the thread took it first."""
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
        claims_kept: timedelta = timedelta(days=30),
        owner: str | None = None,
    ) -> None:
        self._store = store
        self._orchestrator = orchestrator
        self._clock = clock
        self._grace = grace
        self._claims_kept = claims_kept
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}"
        self._turns = ThreadTurns(store)
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
                started += await self._start(claim, cron, repair=True)
            # A claim per tick fired: a cron every 2 s makes 43,200 a day.
            await self._store.crons.forget_claims(now - self._claims_kept, limit=BATCH)
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
                started = await self._start(claim, cron, repair=False)
        fields: dict[str, object] = {"next_run_date": firing.next_run_date}
        if cron.end_time is not None and firing.next_run_date > cron.end_time:
            fields["enabled"] = False  # its last tick is behind it
        await self._store.crons.set_fields(cron.tenant, cron.cron_id, fields)
        return started

    def _claim_of(self, cron: CronRecord, tick: datetime) -> TickClaim:
        if cron.thread_id is not None:
            # A tick of a cron on a thread is the thread's next turn: which one is known only
            # when it starts (``_start_turn``).
            thread_id, execution_id = cron.thread_id, None
        else:
            thread_id = tick_thread_id(cron.cron_id, tick)
            execution_id = execution_id_for(
                cron.project_id, cron.workspace_id, turn_key(thread_id, 1)
            )
        return TickClaim(
            claim_id=tick_id(cron.cron_id, tick),
            cron_id=cron.cron_id,
            project_id=cron.project_id,
            workspace_id=cron.workspace_id,
            tick=tick,
            thread_id=thread_id,
            execution_id=execution_id,
            claimed_by=self._owner,
            claimed_at=self._clock(),
        )

    async def _start(self, claim: TickClaim, cron: CronRecord | None, *, repair: bool) -> int:
        """Store and start the tick's execution (again, after a crash: the same one)."""
        if cron is None:
            # Deleted between its claim and its start: the tick fires nothing.
            return await self._ends(claim, None)
        if not self._orchestrator.knows_agent(cron.assistant_id):
            # Unregistered since the cron was made: the tick starts nothing.
            log.warning("cron.agent_unknown", cron_id=cron.cron_id, agent=cron.assistant_id)
            return await self._ends(claim, "refused")
        try:
            given = AgentInput(state=graph_state(cron.payload.get("input") or {}))
        except InputError as exc:
            # Checked when the cron was made; an agent changed since may refuse it now.
            log.warning("cron.input_refused", cron_id=cron.cron_id, why=exc.detail)
            return await self._ends(claim, "refused")
        if cron.thread_id is not None:
            event = await self._start_turn(claim, cron, given, repair=repair)
            if event is None:
                return 0
        else:
            event = await self._start_thread(claim, cron, given)
        try:
            await self._orchestrator.on_scheduled(event)
        except RejectedMessage as refused:
            # Its agent was unregistered since: the tick ends here, its execution with it.
            log.warning("cron.tick_refused", cron_id=cron.cron_id, why=str(refused))
            return await self._ends(claim, "refused")
        await self._ends(claim, "fired", event.execution_id)
        log.info(
            "cron.fired",
            cron_id=cron.cron_id,
            tick=claim.tick.isoformat(),
            execution_id=event.execution_id,
        )
        return 1

    async def _ends(
        self, claim: TickClaim, outcome: str | None, execution_id: str | None = None
    ) -> int:
        """The tick is done with (started, or never to start): no sweep looks at it again."""
        await self._store.crons.mark_started(claim.claim_id, execution_id)
        if outcome is not None:
            metrics.CRON_TICKS.labels(outcome).inc()
        return 0

    def _request(
        self, claim: TickClaim, cron: CronRecord, given: AgentInput, turn: ThreadTurn
    ) -> ExecutionRequested:
        execution_id = execution_id_for(
            cron.project_id, cron.workspace_id, turn_key(turn.thread_id, turn.turn)
        )
        return ExecutionRequested(
            event_id=f"{execution_id}:requested",
            execution_id=execution_id,
            correlation_id=execution_id,
            project_id=cron.project_id,
            workspace_id=cron.workspace_id,
            agent=cron.assistant_id,
            input=given.model_copy(update={"turn": turn}),
            idempotency_key=turn_key(turn.thread_id, turn.turn),
            requested_by=cron.requested_by,
            requester_identity=cron.requester_identity,
        )

    async def _stored(
        self, claim: TickClaim, cron: CronRecord, event: ExecutionRequested
    ) -> tuple[Execution, bool]:
        """The tick's execution, stored unless its id is taken: the stored one, and whether it
        was created now."""
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
        return await self._store.executions.create(pending)

    async def _start_thread(
        self, claim: TickClaim, cron: CronRecord, given: AgentInput
    ) -> ExecutionRequested:
        """A stateless cron's tick: the first turn of a thread of its own, both derived from the
        tick, so starting it again starts the same run."""
        turn = ThreadTurn(thread_id=claim.thread_id, turn=1, request_id=claim.claim_id)
        event = self._request(claim, cron, given, turn)
        await self._stored(claim, cron, event)
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
        return event

    async def _start_turn(
        self, claim: TickClaim, cron: CronRecord, given: AgentInput, *, repair: bool
    ) -> ExecutionRequested | None:
        """A tick of a cron on a thread: the thread's next turn, placed by the cron's busy-thread
        policy as a run's is (``enqueue``: after the turn it finds running or waiting for a
        review; ``reject``: the tick is skipped). Its turn carries the claim's id as its request
        id, so a tick whose start was cut short finds the turn it stored and starts that one,
        never a second. None: nothing to start (counted, the claim done with)."""
        record = await self._store.threads.get(cron.project_id, cron.workspace_id, claim.thread_id)
        if record is None or record.deleted:
            log.warning("cron.thread_gone", cron_id=cron.cron_id, thread_id=claim.thread_id)
            await self._ends(claim, "refused")
            return None
        if repair:
            mine = await self._tick_turn(record, claim)
            if mine is not None:
                if mine.input.turn is not None and mine.input.turn.after is not None:
                    # Its replacement may have been cut short too: asked again, it is no-op.
                    await self._replace(cron, mine, mine.input.turn.after)
                return request_of(mine)
        for _ in range(RACES):
            try:
                plan = await self._turns.plan(record, cron.assistant_id, cron.multitask_strategy)
            except ThreadBusy:
                log.info("cron.thread_busy", cron_id=cron.cron_id, thread_id=claim.thread_id)
                await self._ends(claim, "busy")
                return None
            except WrongAgent as wrong:
                log.warning("cron.wrong_agent", cron_id=cron.cron_id, thread_agent=wrong.agent)
                await self._ends(claim, "refused")
                return None
            turn = ThreadTurn(
                thread_id=claim.thread_id,
                turn=plan.turn,
                after=plan.after,
                base=plan.base,
                policy=cron.multitask_strategy,
                request_id=claim.claim_id,
            )
            event = self._request(claim, cron, given, turn)
            stored, created = await self._stored(claim, cron, event)
            if not created and not _is_tick(stored, claim):
                continue  # a run of the thread took this turn first: plan again
            await self._store.threads.note_turn(
                cron.project_id,
                cron.workspace_id,
                claim.thread_id,
                plan.turn,
                expires_at=expiry(record.ttl_minutes, self._clock()),
            )
            if plan.cancels is not None:
                # As a run with this policy: the new turn is stored (it waits for the replaced
                # one's end), then the replaced one is cancelled, its review with it.
                await self._replace(cron, stored, plan.cancels.execution_id)
            return event
        log.warning("cron.turn_races_lost", cron_id=cron.cron_id, thread_id=claim.thread_id)
        return None  # left unstarted: a later sweep tries again

    async def _replace(self, cron: CronRecord, by: Execution, replaced_id: str) -> None:
        """Cancel the turn ``by`` replaces, when the cron's policy replaces turns and that turn
        has not ended; its audit trail says by which tick and why."""
        if cron.multitask_strategy not in ("interrupt", "rollback"):
            return
        kept = "its state is kept" if cron.multitask_strategy == "interrupt" else "rolled back"
        request = CancelRequested(
            event_id=f"{replaced_id}:replaced-by:{by.execution_id}",
            execution_id=replaced_id,
            correlation_id=replaced_id,
            project_id=cron.project_id,
            workspace_id=cron.workspace_id,
            reason=(
                f"replaced by turn {turn_number(by)} of its thread, a tick of cron"
                f" {cron.cron_id} (multitask_strategy={cron.multitask_strategy}): {kept}"
            ),
            requested_by=cron.requested_by,
        )
        try:
            await self._orchestrator.cancel_replaced(request)
        except RejectedMessage:
            # It ended meanwhile: the new turn starts on what it left.
            log.info("cron.replaced_ended", execution_id=replaced_id)

    async def _tick_turn(self, record: ThreadRecord, claim: TickClaim) -> Execution | None:
        """The turn this tick stored before its start was cut short, if any: among the thread's
        latest turns (others may have come after it)."""
        latest = await self._turns.latest(record)
        if latest is None:
            return None
        newest = turn_number(latest)
        for number in range(newest, max(0, newest - MAX_TURN_PROBES), -1):
            turn = latest if number == newest else await self._turns.turn(record, number)
            if turn is not None and _is_tick(turn, claim):
                return turn
        return None


def _is_tick(execution: Execution, claim: TickClaim) -> bool:
    return execution.input.turn is not None and execution.input.turn.request_id == claim.claim_id
