"""Where a thread stands, read from the store: its latest turn, the turn a decision answers,
and where a new input goes (shared/domain/threads.py says how a thread chains its executions).
The gateway plans its runs here (services/gateway/conversations.py), and the orchestrators the
ticks of a cron on a thread (services/orchestrator/crons.py).

Reading where a thread stands is point reads of its turns from the store's hint on
(``ThreadRecord.turns``): the hinted turn and the one after it at once, and further only when a
racing writer left the hint behind.
"""

from __future__ import annotations

import asyncio
import dataclasses

from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.threads import (
    MAX_TURN_PROBES,
    TurnPlan,
    WrongAgent,
    has_run,
    plan_turn,
    turn_execution_id,
    turn_number,
)
from shared.events import BusyThreadPolicy
from shared.store.ports import Store
from shared.store.threads import ThreadRecord


class ThreadTurns:
    def __init__(self, store: Store) -> None:
        # The store, not its executions: read when a turn is, so a caller may build this with
        # a store it fills in later (the tests' fakes).
        self._store = store

    async def execution(
        self, project_id: str, workspace_id: str, execution_id: str
    ) -> Execution | None:
        """The execution's newest version, if it is the workspace's."""
        found = await self._store.executions.get(project_id, execution_id)
        return found if found is not None and found.workspace_id == workspace_id else None

    async def turn(self, record: ThreadRecord, number: int) -> Execution | None:
        execution_id = turn_execution_id(
            record.project_id, record.workspace_id, record.thread_id, number
        )
        return await self.execution(record.project_id, record.workspace_id, execution_id)

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
            execution = await self.execution(
                execution.project_id, execution.workspace_id, execution.input.turn.after
            )
        return execution
