"""The sandbox's handling of ``execution.dispatched``: run the agent, report what happened."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from services.sandbox.runner import (
    Admission,
    AgentRunner,
    Attempt,
    Completed,
    Failed,
    NotCurrent,
    Refused,
    RunOutcome,
    Suspended,
)
from services.sandbox.suspension import review_view
from shared import tracing
from shared.bus import EventPublisher, carried_headers
from shared.crypto import Keyring
from shared.custom_headers import open_carried
from shared.domain.execution import Execution
from shared.errors import Fenced, RejectedMessage
from shared.events import (
    ExecutionDispatched,
    ExecutionFailure,
    ExecutionReported,
    ExecutionSuspended,
    ReportOutcome,
)
from shared.faults import fault_point
from shared.store.ports import Store
from shared.topics import Topics

log = structlog.get_logger(__name__)


class Sandbox:
    def __init__(
        self,
        *,
        store: Store,
        publisher: EventPublisher,
        topics: Topics,
        runner: AgentRunner,
        keyring: Keyring,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._topics = topics
        self._runner = runner
        self._keyring = keyring

    async def on_dispatched(self, command: ExecutionDispatched) -> None:
        origin = command.execution_trace
        if command.execution_version is None:
            # A command of an older orchestrator: the execution is read first, as it was then.
            execution = await self._execution_of(command)
            if not self._is_current(command, execution):
                return
            origin = execution.trace_context
        common: dict[str, Any] = {
            "execution_id": command.execution_id,
            "project_id": command.project_id,
            "workspace_id": command.workspace_id,
            "causation_id": command.event_id,
            "correlation_id": command.correlation_id,
        }
        headers = open_carried(carried_headers(), self._keyring, command.execution_id)
        if headers.unreadable is not None:
            # The run goes on without them, and the audit trail says so (never the values).
            log.warning("custom_headers.unreadable", reason=headers.unreadable)
        started = ExecutionReported(
            event_id=f"{command.execution_id}:started:{command.epoch}",
            epoch=command.epoch,
            outcome=ReportOutcome.STARTED,
            custom_headers_unreadable=headers.unreadable,
            **common,
        )
        started_sent: asyncio.Future[None] | None = None

        async def admit() -> bool:
            """Is the command still current? Asked while the run begins its attempt and reads
            its checkpoint (the three round trips at once); once it is, the run is announced.
            Not waited for before the run: its acknowledgement is awaited before any other
            report, so it still comes first and a failed send still fails the delivery (which
            is handled again), but the run does not wait a broker round trip to begin."""
            nonlocal started_sent
            if command.execution_version is not None and not await self._still_current(command):
                return False
            started_sent = asyncio.ensure_future(
                self._publisher.publish(started, self._topics.reported, key=command.execution_id)
            )
            return True

        try:
            outcome, attempt = await self._run(command, headers.headers, origin, admit)
        except NotCurrent:
            return
        except Fenced as exc:
            # A newer attempt (another replica) owns this run now; it reports, we must not.
            log.warning("dispatch.fenced", reason=str(exc))
            return
        finally:
            if started_sent is not None:
                await started_sent
        await self._report_outcome(command, common, outcome)
        log.info(
            "dispatch.ran",
            kind=command.kind.value,
            epoch=command.epoch,
            attempt=attempt.number if attempt else None,
            outcome=type(outcome).__name__,
        )

    async def _still_current(self, command: ExecutionDispatched) -> bool:
        """The command is current while the version that called for it is the execution's
        newest (one point read); after a later one (the run's own start was recorded, a cancel,
        a redelivered old command) the execution says."""
        assert command.execution_version is not None
        if await self._store.executions.unchanged_since(
            command.execution_id, command.execution_version
        ):
            return True
        return self._is_current(command, await self._execution_of(command))

    async def _execution_of(self, command: ExecutionDispatched) -> Execution:
        # Not older than the dispatch: the head alone answers, unless it trails the log.
        execution = await self._store.executions.get(
            command.project_id, command.execution_id, min_epoch=command.epoch
        )
        if execution is None:
            raise RejectedMessage(f"unknown execution {command.execution_id}")
        return execution

    @staticmethod
    def _is_current(command: ExecutionDispatched, execution: Execution) -> bool:
        if command.epoch != execution.epoch or execution.status.is_terminal:
            # A re-sent or overtaken command, or one of an execution cancelled meanwhile: the
            # orchestrator has moved on, nothing to run.
            log.info("dispatch.stale", epoch=command.epoch, current_epoch=execution.epoch)
            return False
        return True

    async def _run(
        self,
        command: ExecutionDispatched,
        headers: dict[str, str],
        origin: Any,
        admit: Admission,
    ) -> tuple[RunOutcome, Attempt | None]:
        """The run, and the fence check after it; raises ``Fenced`` when a newer attempt took
        it over."""
        # A resume is a trace of its own (it began at the reviewer's request, maybe days
        # later); its run links back to the trace that created the execution.
        with tracing.span(
            f"run {command.agent}",
            attributes={
                "interlock.execution_id": command.execution_id,
                "interlock.agent": command.agent,
                "interlock.dispatch": command.kind.value,
                "interlock.epoch": command.epoch,
            },
            links=tracing.link_to(origin, "execution.origin"),
        ) as run_span:
            outcome, attempt = await self._runner.run(command, headers, admit)
            run_span.set_attribute("interlock.outcome", type(outcome).__name__)
        # The runner has checked that the attempt is still current (``AgentRunner.run``).
        fault_point("sandbox.before_report")
        return outcome, attempt

    async def _report_outcome(
        self, command: ExecutionDispatched, common: dict[str, Any], outcome: RunOutcome
    ) -> None:
        match outcome:
            case Suspended(
                interrupts=interrupts,
                agent_fingerprint=fingerprint,
                reviews=reviews,
                tools=tools,
                values=values,
                next=waiting,
            ):
                context, allowed = review_view(interrupts, reviews)
                event = ExecutionSuspended(
                    event_id=f"{command.execution_id}:suspended:{command.epoch}",
                    agent=command.agent,
                    epoch=command.epoch,
                    suspension_id=command.epoch,
                    suspend_context=context,
                    allowed_decisions=allowed,
                    interrupts=interrupts,
                    agent_fingerprint=fingerprint,
                    reviews=reviews,
                    tools=tools,
                    values=values,
                    next=waiting,
                    **common,
                )
                await self._publisher.publish(
                    event, self._topics.suspended, key=command.execution_id
                )
            case Completed(result=result):
                await self._report(command, ReportOutcome.COMPLETED, common, result=result)
            case Failed(error_type=error_type, message=message):
                failure = ExecutionFailure(error_type=error_type, message=message)
                await self._report(command, ReportOutcome.FAILED, common, error=failure)
            case Refused(message=message, error_type=error_type):
                failure = ExecutionFailure(error_type=error_type, message=message)
                await self._report(command, ReportOutcome.REFUSED, common, error=failure)

    async def _report(
        self,
        command: ExecutionDispatched,
        outcome: ReportOutcome,
        common: dict[str, Any],
        **fields: Any,
    ) -> None:
        report = ExecutionReported(
            event_id=f"{command.execution_id}:finished:{command.epoch}",
            epoch=command.epoch,
            outcome=outcome,
            **common,
            **fields,
        )
        await self._publisher.publish(report, self._topics.reported, key=command.execution_id)
