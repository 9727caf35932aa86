"""A thread's turns as the gateway reads and starts them (shared/domain/threads.py says how a
thread chains its executions). Free of HTTP: the LangGraph API and Interlock's own invoke route
both start turns here.

Reading where a thread stands is point reads of its turns from the store's hint on
(``ThreadRecord.turns``): the hinted turn and the one after it at once, and further only when a
racing writer left the hint behind. Starting a turn is one insert of its execution under the
turn's key: two requests that read the same latest turn race for one key, and the loser plans
again from the turn that won.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta
from typing import Literal

import structlog

from services.gateway.errors import ExecutionNotFound, IdempotencyKeyReused
from services.gateway.intake import Intake
from shared.domain.cancellation import AlreadyFinished
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.threads import (
    MAX_TURN_PROBES,
    TurnPlan,
    has_run,
    plan_turn,
    turn_execution_id,
    turn_key,
    turn_number,
)
from shared.errors import InterlockError
from shared.events import AgentInput, BusyThreadPolicy, ThreadTurn, utc_now
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)


def expiry(ttl_minutes: float | None, now: datetime) -> datetime | None:
    """When a thread with this time to live expires, counted from ``now``."""
    return None if ttl_minutes is None else now + timedelta(minutes=ttl_minutes)


RACES = 5
"""How often a new turn is planned again after another request took the one planned."""


class TurnTaken(InterlockError):
    """Another request started the turn this one planned: plan again."""

    problem_type = "thread-busy"
    problem_title = "Thread is busy"
    problem_status = 409


class WrongAgent(InterlockError):
    """A turn names another agent than its thread's: a thread is one agent's conversation (its
    checkpoints are that graph's state)."""

    problem_type = "assistant-mismatch"
    problem_title = "Agent does not match the thread"
    problem_status = 409

    def __init__(self, agent: str) -> None:
        super().__init__(agent)
        self.agent = agent


class Conversations:
    def __init__(
        self, intake: Intake, store: Store, *, default_ttl_minutes: float | None = None
    ) -> None:
        self._intake = intake
        self._store = store
        self._default_ttl = default_ttl_minutes

    def new_thread(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        metadata: dict[str, object] | None = None,
        ttl_minutes: float | None = None,
    ) -> ThreadRecord:
        """A thread to create: with its own ttl, else the deployment's default
        (``INTERLOCK_THREAD_TTL_MINUTES``), else kept until deleted."""
        ttl = ttl_minutes if ttl_minutes is not None else self._default_ttl
        now = utc_now()
        return ThreadRecord(
            project_id=project_id,
            workspace_id=workspace_id,
            thread_id=thread_id,
            created_at=now,
            metadata=dict(metadata or {}),
            ttl_minutes=ttl,
            expires_at=expiry(ttl, now),
        )

    async def turn(self, record: ThreadRecord, number: int) -> Execution | None:
        execution_id = turn_execution_id(
            record.project_id, record.workspace_id, record.thread_id, number
        )
        try:
            return await self._intake.get(record.project_id, record.workspace_id, execution_id)
        except ExecutionNotFound:
            return None

    async def latest(self, record: ThreadRecord) -> Execution | None:
        """The thread's latest turn (None: it has run nothing). The hint never leads, so the
        hinted turn exists; the one after it normally does not."""
        number = max(record.turns, 1)
        found, following = await asyncio.gather(
            self.turn(record, number), self.turn(record, number + 1)
        )
        if following is None:
            if found is None and number > 1:
                # Never expected (a hint is noted after its turn is stored), but a hint ahead of
                # the turns must not hide them: look back.
                return await self._before(record, number)
            return found
        # The hint trailed (a writer between its insert and its note, or one that lost the
        # note): read on to the end.
        latest = following
        for beyond in range(number + 2, number + 2 + MAX_TURN_PROBES):
            after = await self.turn(record, beyond)
            if after is None:
                break
            latest = after
        return latest

    async def _before(self, record: ThreadRecord, number: int) -> Execution | None:
        for earlier in range(number - 1, max(0, number - 1 - MAX_TURN_PROBES), -1):
            found = await self.turn(record, earlier)
            if found is not None:
                return found
        return None

    async def plan(self, record: ThreadRecord, agent: str, policy: BusyThreadPolicy) -> TurnPlan:
        """Where a new input of ``agent`` goes on the thread as it stands now. Raises
        ``WrongAgent`` and ``ThreadBusy`` (policy ``reject``)."""
        latest = await self.latest(record)
        if latest is not None and latest.agent != agent:
            raise WrongAgent(latest.agent)
        if latest is None or has_run(latest) or not latest.status.is_terminal:
            return plan_turn(latest, policy)
        # The latest turn was cancelled while it waited: the thread is as busy as the turn it
        # waited for, and the new turn goes after the latest all the same.
        current = await self.answerable(latest)
        plan = plan_turn(current, policy)
        return dataclasses.replace(plan, turn=turn_number(latest) + 1, after=latest.execution_id)

    async def earlier(self, execution: Execution, back: int) -> list[Execution]:
        """Up to ``back`` turns before ``execution``, nearest first (the turns of its thread,
        whatever they did)."""
        turn = execution.input.turn
        if turn is None or turn.turn == 1 or back <= 0:
            return []
        record = ThreadRecord(
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
            thread_id=turn.thread_id,
        )
        numbers = range(turn.turn - 1, max(0, turn.turn - 1 - back), -1)
        found = await asyncio.gather(*(self.turn(record, n) for n in numbers))
        return [e for e in found if e is not None]

    async def answerable(self, latest: Execution | None) -> Execution | None:
        """The turn a decision answers: the latest one that ran (a turn queued behind a review
        waits for that review; one cancelled while it waited never ran)."""
        execution = latest
        for _ in range(MAX_TURN_PROBES):
            if execution is None or execution.input.turn is None:
                return execution
            queued = execution.status is ExecutionStatus.PENDING and execution.epoch == 0
            dropped = execution.status.is_terminal and not has_run(execution)
            if not (queued or dropped) or execution.input.turn.after is None:
                return execution
            try:
                execution = await self._intake.get(
                    execution.project_id, execution.workspace_id, execution.input.turn.after
                )
            except ExecutionNotFound:
                return None
        return execution

    async def base(self, execution: Execution) -> Execution | None:
        """The execution a turn starts from, when its own values are not there yet."""
        turn = execution.input.turn
        if turn is None or turn.base is None:
            return None
        try:
            return await self._intake.get(execution.project_id, execution.workspace_id, turn.base)
        except ExecutionNotFound:
            return None

    async def start(
        self,
        record: ThreadRecord,
        plan: TurnPlan,
        *,
        agent: str,
        given: AgentInput,
        policy: BusyThreadPolicy,
        requested_by: str | None,
        requester_identity: str | None,
        headers: dict[str, str] | None,
        kind: Literal["run", "update"] = "run",
        as_node: str | None = None,
        webhook: str | None = None,
    ) -> Execution:
        """Start the turn ``plan`` says, then cancel the turn it replaces (``interrupt`` and
        ``rollback``: the new turn waits for that one's end, so the two never overlap). Raises
        ``TurnTaken`` when another request started that turn first."""
        turn = ThreadTurn(
            thread_id=record.thread_id,
            turn=plan.turn,
            after=plan.after,
            base=plan.base,
            policy=policy,
            kind=kind,
            as_node=as_node,
        )
        try:
            execution = await self._intake.invoke(
                project_id=record.project_id,
                workspace_id=record.workspace_id,
                agent=agent,
                agent_input=given.model_copy(update={"turn": turn}),
                idempotency_key=turn_key(record.thread_id, plan.turn),
                requested_by=requested_by,
                requester_identity=requester_identity,
                headers=headers,
                webhook=webhook,
            )
        except IdempotencyKeyReused:
            raise TurnTaken(plan.turn) from None
        try:
            # A new turn restarts the thread's time to live, in the same write as its note.
            await self._store.threads.note_turn(
                record.project_id,
                record.workspace_id,
                record.thread_id,
                plan.turn,
                expires_at=expiry(record.ttl_minutes, utc_now()),
            )
        except Exception:
            # Only a hint (readers probe past it): the turn is stored and on its way, and a 503
            # now would have the client send it again as another turn.
            log.warning("thread.turn_not_noted", thread_id=record.thread_id, turn=plan.turn)
        if plan.cancels is not None:
            await self._cancel(plan.cancels, execution, policy, requested_by)
        return execution

    async def _cancel(
        self,
        replaced: Execution,
        by: Execution,
        policy: BusyThreadPolicy,
        requested_by: str | None,
    ) -> None:
        """Cancel the turn a new one replaces, saying so in its audit trail (a review it waited
        for ends with it, and the trail says why and who)."""
        reason = (
            f"replaced by turn {turn_number(by)} of its thread (multitask_strategy={policy}):"
            f" {'its state is kept' if policy == 'interrupt' else 'rolled back'}"
        )
        try:
            await self._intake.cancel(
                project_id=replaced.project_id,
                workspace_id=replaced.workspace_id,
                execution_id=replaced.execution_id,
                reason=reason,
                requested_by=requested_by,
            )
        except AlreadyFinished:
            # It ended meanwhile: the new turn starts on what it left.
            log.info("turn.replaced_ended", execution_id=replaced.execution_id)
