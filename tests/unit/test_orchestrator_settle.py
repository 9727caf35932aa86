"""The orchestrator publishes what a stored outcome calls for while the writes that follow its
compare-and-set (``Written.settle``: the MongoDB store's head and markers) are still being
made, and returns only once they are done, so its message is acknowledged after both; a
failure of either fails the handling (the message is delivered again)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from services.orchestrator.handlers import Orchestrator
from shared.agents import load_registry
from shared.domain.execution import Execution
from shared.events import ExecutionDispatched, ReportOutcome
from shared.senders import GatewaySender
from shared.settings import CommonSettings
from shared.store.memory import InMemoryExecutionStore, InMemoryStore
from shared.store.ports import Written
from shared.topics import Topics
from tests import factories as f
from tests.publishers import RecordingPublisher


class GatedSettle(InMemoryExecutionStore):
    """Each compare-and-set's settle waits for ``gate``; ``settled`` counts those done."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.settling = asyncio.Event()
        self.settled = 0
        self.fail = fail

    async def compare_and_set(self, current: Execution, successor: Execution) -> Written | None:
        written = await super().compare_and_set(current, successor)
        if written is None:
            return None

        async def settle() -> None:
            self.settling.set()
            await self.gate.wait()
            if self.fail:
                raise ConnectionError("store unreachable")
            self.settled += 1

        return Written(written.execution, settle)


class SignallingPublisher(RecordingPublisher):
    def __init__(self) -> None:
        super().__init__()
        self.dispatched = asyncio.Event()

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        await super().publish(event, topic, key=key, headers=headers)
        if isinstance(event, ExecutionDispatched):
            self.dispatched.set()


def orchestrator(
    executions: InMemoryExecutionStore, publisher: SignallingPublisher
) -> Orchestrator:
    store = InMemoryStore()
    store.executions = executions
    return Orchestrator(
        store=store,
        publisher=publisher,
        topics=Topics(""),
        registry=load_registry(CommonSettings().agents_file),
    )


async def test_the_dispatch_goes_out_before_the_writes_after_the_compare_and_set() -> None:
    executions, publisher = GatedSettle(), SignallingPublisher()
    await executions.create(f.pending("exec-1"))
    handling = asyncio.create_task(
        orchestrator(executions, publisher).on_requested(
            f.requested("exec-1"), GatewaySender("development")
        )
    )
    await asyncio.wait_for(publisher.dispatched.wait(), timeout=5)
    assert executions.settling.is_set() and executions.settled == 0
    await asyncio.sleep(0)
    assert not handling.done()  # not acknowledged before the writes are made
    executions.gate.set()
    await asyncio.wait_for(handling, timeout=5)
    assert executions.settled == 1


async def test_writes_after_the_compare_and_set_that_fail_fail_the_handling() -> None:
    executions, publisher = GatedSettle(fail=True), SignallingPublisher()
    await executions.create(f.pending("exec-1"))
    executions.gate.set()
    with pytest.raises(ConnectionError):
        await orchestrator(executions, publisher).on_requested(
            f.requested("exec-1"), GatewaySender("development")
        )
    assert publisher.dispatched.is_set()  # sent meanwhile: a redelivery sends it again


class MarkRecorder(InMemoryExecutionStore):
    def __init__(self) -> None:
        super().__init__()
        self.marked: list[tuple[str, int]] = []

    async def mark_waiting(self, execution: Execution) -> None:
        self.marked.append((execution.execution_id, execution.version))


async def test_a_redelivered_suspension_marks_the_execution_waiting_again() -> None:
    """The marker of a suspension is written with its version (shared/store/mongo/markers.py):
    the redelivery of the event, after a crash between the two, makes it again; the first
    delivery and an unrelated late event do not."""
    executions, publisher = MarkRecorder(), SignallingPublisher()
    await executions.create(f.pending("exec-1"))
    handler = orchestrator(executions, publisher)
    await handler.on_requested(f.requested("exec-1"), GatewaySender("development"))
    dispatched = await executions.get(f.SCOPE["project_id"], "exec-1")
    assert dispatched is not None
    suspension = f.suspended_event(dispatched)
    await handler.on_suspended(suspension)
    assert executions.marked == []
    await orchestrator(executions, publisher).on_suspended(suspension)
    waiting = await executions.get(f.SCOPE["project_id"], "exec-1")
    assert waiting is not None and executions.marked == [("exec-1", waiting.version)]
    late_start = f.report(dispatched, ReportOutcome.STARTED)
    await orchestrator(executions, publisher).on_reported(late_start)
    assert executions.marked == [("exec-1", waiting.version)]
