"""A dispatch that names the version it came from is checked with one point read, while its run
begins (not a read of the execution before it), and is still never run once the execution moved
on: cancelled, or dispatched again at a later epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from services.orchestrator import state_machine as sm
from services.sandbox.handlers import Sandbox
from shared.crypto import process_keyring
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import CancelRequested, ExecutionDispatched, ExecutionReported, ReportOutcome
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.unit.test_sandbox_runner import runner_for

TOPICS = Topics("")


class Recorder:
    def __init__(self) -> None:
        self.sent: list[BaseModel] = []

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        self.sent.append(event)

    def outcomes(self) -> list[str]:
        return [
            e.outcome.value if isinstance(e, ExecutionReported) else e.type  # type: ignore[attr-defined]
            for e in self.sent
        ]


class CountingStore(InMemoryStore):
    """The in-memory store, counting the reads of whole executions."""

    def __init__(self) -> None:
        super().__init__()
        self.execution_reads = 0
        reads = self.executions.get

        async def get(*args: Any, **kwargs: Any) -> Execution | None:
            self.execution_reads += 1
            return await reads(*args, **kwargs)

        self.executions.get = get  # type: ignore[method-assign]


async def dispatched(store: InMemoryStore, execution_id: str) -> tuple[Execution, Any]:
    """An execution stored as the orchestrator leaves it when it dispatches, and the command."""
    created, _ = await store.executions.create(f.pending(execution_id))
    outcome = sm.on_requested(created, f.requested(execution_id))
    stored = await store.executions.replace(created, outcome.execution)
    assert stored is not None
    (command,) = sm.follow_ups(stored, causation_id="test")
    assert command.execution_version == stored.version
    return stored, command


def sandbox_on(tmp_path: Path, store: InMemoryStore, publisher: Recorder) -> Sandbox:
    return Sandbox(
        store=store,
        publisher=publisher,
        topics=TOPICS,
        runner=runner_for(tmp_path, "", store),
        keyring=process_keyring(),
    )


async def test_a_current_command_runs_without_reading_the_execution(tmp_path: Path) -> None:
    store, publisher = CountingStore(), Recorder()
    _, command = await dispatched(store, "exec-admit")
    await sandbox_on(tmp_path, store, publisher).on_dispatched(command)
    assert publisher.outcomes() == ["started", "execution.suspended"]
    assert store.execution_reads == 0


async def test_a_command_of_an_execution_cancelled_meanwhile_is_not_run(tmp_path: Path) -> None:
    store, publisher = CountingStore(), Recorder()
    stored, command = await dispatched(store, "exec-cancelled")
    cancel = CancelRequested(
        execution_id=stored.execution_id,
        project_id=stored.project_id,
        workspace_id=stored.workspace_id,
        reason="changed my mind",
    )
    cancelled = await store.executions.replace(stored, sm.on_cancel(stored, cancel).execution)
    assert cancelled is not None and cancelled.status is ExecutionStatus.CANCELLED
    await sandbox_on(tmp_path, store, publisher).on_dispatched(command)
    assert publisher.sent == []  # not even announced as started
    assert store.execution_reads == 1  # the later version sent it to the execution


async def test_a_command_after_its_own_start_was_recorded_still_runs(tmp_path: Path) -> None:
    """A later version of the same epoch (the run's start, recorded from an earlier attempt's
    report) leaves the command current: the execution is read and says so."""
    store, publisher = CountingStore(), Recorder()
    stored, command = await dispatched(store, "exec-restarted")
    started = sm.on_started(stored, f.report(stored, ReportOutcome.STARTED))
    assert await store.executions.replace(stored, started.execution) is not None
    await sandbox_on(tmp_path, store, publisher).on_dispatched(command)
    assert publisher.outcomes() == ["started", "execution.suspended"]
    assert store.execution_reads == 1


async def test_an_older_orchestrators_command_reads_the_execution_first(tmp_path: Path) -> None:
    store, publisher = CountingStore(), Recorder()
    _, command = await dispatched(store, "exec-older")
    older: ExecutionDispatched = command.model_copy(
        update={"execution_version": None, "execution_trace": None}
    )
    await sandbox_on(tmp_path, store, publisher).on_dispatched(older)
    assert publisher.outcomes() == ["started", "execution.suspended"]
    assert store.execution_reads == 1
