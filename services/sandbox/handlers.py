"""The sandbox's handling of ``execution.dispatched``: run the agent, report what happened."""

from __future__ import annotations

import structlog

from services.sandbox.runner import AgentRunner, Completed, Failed, Suspended
from services.sandbox.suspension import review_view
from shared.bus import EventPublisher
from shared.errors import RejectedMessage
from shared.events import (
    ExecutionDispatched,
    ExecutionFailure,
    ExecutionReported,
    ExecutionSuspended,
    ReportOutcome,
)
from shared.store.ports import Store
from shared.topics import Topics

log = structlog.get_logger(__name__)


class Sandbox:
    def __init__(
        self, *, store: Store, publisher: EventPublisher, topics: Topics, runner: AgentRunner
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._topics = topics
        self._runner = runner

    async def on_dispatched(self, command: ExecutionDispatched) -> None:
        execution = await self._store.executions.get(command.project_id, command.execution_id)
        if execution is None:
            raise RejectedMessage(f"unknown execution {command.execution_id}")
        if command.epoch != execution.epoch or execution.status.is_terminal:
            # A re-sent or overtaken command: the orchestrator has moved on, nothing to run.
            log.info("dispatch.stale", epoch=command.epoch, current_epoch=execution.epoch)
            return
        common = {
            "execution_id": command.execution_id,
            "project_id": command.project_id,
            "workspace_id": command.workspace_id,
            "causation_id": command.event_id,
            "correlation_id": command.correlation_id,
        }
        started = ExecutionReported(
            event_id=f"{command.execution_id}:started:{command.epoch}",
            epoch=command.epoch,
            outcome=ReportOutcome.STARTED,
            **common,
        )
        await self._publisher.publish(started, self._topics.reported, key=command.execution_id)

        outcome = await self._runner.run(command)
        match outcome:
            case Suspended(interrupts=interrupts):
                context, allowed = review_view(interrupts)
                event = ExecutionSuspended(
                    event_id=f"{command.execution_id}:suspended:{command.epoch}",
                    agent=command.agent,
                    epoch=command.epoch,
                    suspension_id=command.epoch,
                    suspend_context=context,
                    allowed_decisions=allowed,
                    interrupts=interrupts,
                    **common,
                )
                await self._publisher.publish(
                    event, self._topics.suspended, key=command.execution_id
                )
            case Completed(result=result):
                done = ExecutionReported(
                    event_id=f"{command.execution_id}:finished:{command.epoch}",
                    epoch=command.epoch,
                    outcome=ReportOutcome.COMPLETED,
                    result=result,
                    **common,
                )
                await self._publisher.publish(done, self._topics.reported, key=command.execution_id)
            case Failed(error_type=error_type, message=message):
                failed = ExecutionReported(
                    event_id=f"{command.execution_id}:finished:{command.epoch}",
                    epoch=command.epoch,
                    outcome=ReportOutcome.FAILED,
                    error=ExecutionFailure(error_type=error_type, message=message),
                    **common,
                )
                await self._publisher.publish(
                    failed, self._topics.reported, key=command.execution_id
                )
        log.info(
            "dispatch.ran",
            kind=command.kind.value,
            epoch=command.epoch,
            outcome=type(outcome).__name__,
        )
