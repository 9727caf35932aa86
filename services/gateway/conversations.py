"""A thread's turns as the gateway reads and starts them (shared/domain/threads.py says how a
thread chains its executions). Free of HTTP: the LangGraph API and Interlock's own invoke route
both start turns here.

Reading where a thread stands is shared/thread_turns.py's. Starting a turn is one insert of its
execution under the turn's key: two requests that read the same latest turn race for one key,
and the loser plans again from the turn that won.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import structlog

from services.gateway.errors import ExecutionNotFound, IdempotencyKeyReused
from services.gateway.intake import Intake
from shared.domain.cancellation import AlreadyFinished
from shared.domain.execution import Execution
from shared.domain.threads import (
    TurnPlan,
    WrongAgent,
    expiry,
    turn_key,
    turn_number,
)
from shared.errors import InterlockError
from shared.events import AgentInput, BusyThreadPolicy, ThreadTurn, utc_now
from shared.store.ports import Store
from shared.store.threads import ThreadRecord
from shared.thread_turns import ThreadTurns

__all__ = ["RACES", "Conversations", "TurnTaken", "WrongAgent", "expiry"]

log = structlog.get_logger(__name__)


RACES = 5
"""How often a new turn is planned again after another request took the one planned."""


class TurnTaken(InterlockError):
    """Another request started the turn this one planned: plan again."""

    problem_type = "thread-busy"
    problem_title = "Thread is busy"
    problem_status = 409


class Conversations(ThreadTurns):
    """A thread's turns, read (``ThreadTurns``) and started."""

    def __init__(
        self, intake: Intake, store: Store, *, default_ttl_minutes: float | None = None
    ) -> None:
        super().__init__(store)
        self._intake = intake
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
