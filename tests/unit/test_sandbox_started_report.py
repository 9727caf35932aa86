"""The sandbox's ``started`` report does not hold its run back: the run begins while the report
waits for the broker, and no other report of the run is published before that one is
acknowledged; a report that cannot be sent fails the delivery (it is handled again)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from services.sandbox.handlers import Sandbox
from services.sandbox.runner import Completed
from shared.crypto import process_keyring
from shared.events import DispatchKind, ExecutionDispatched, ExecutionReported, ReportOutcome
from shared.topics import Topics

TOPICS = Topics("")


class GatedPublisher:
    """Holds the ``started`` report until ``release``; records the order reports went out."""

    def __init__(self, fail_started: bool = False) -> None:
        self.gate = asyncio.Event()
        self.sent: list[str] = []
        self.fail_started = fail_started

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        assert isinstance(event, ExecutionReported)
        if event.outcome is ReportOutcome.STARTED:
            await self.gate.wait()
            if self.fail_started:
                raise ConnectionError("broker unreachable")
        self.sent.append(event.outcome.value)


class RecordingRunner:
    def __init__(self, publisher: GatedPublisher) -> None:
        self.publisher = publisher
        self.began_before_started_acknowledged: bool | None = None

    async def run(self, command: Any, headers: Any) -> tuple[Any, None]:
        self.began_before_started_acknowledged = not self.publisher.gate.is_set()
        # The broker answers while the run works.
        self.publisher.gate.set()
        await asyncio.sleep(0)
        return Completed(result={"ok": True}), None


def sandbox(publisher: GatedPublisher, runner: RecordingRunner) -> Sandbox:
    execution = SimpleNamespace(
        epoch=1, status=SimpleNamespace(is_terminal=False), trace_context=None
    )

    async def get(*_: Any, **__: Any) -> Any:
        return execution

    store: Any = SimpleNamespace(executions=SimpleNamespace(get=get))
    return Sandbox(
        store=store, publisher=publisher, topics=TOPICS, runner=runner, keyring=process_keyring()
    )


DISPATCH = ExecutionDispatched(
    event_id="e-1:dispatch:1",
    execution_id="e-1",
    correlation_id="e-1",
    project_id="p1",
    workspace_id="w1",
    agent="bench-pipeline",
    epoch=1,
    kind=DispatchKind.START,
)


async def handle(handler: Sandbox) -> None:
    # Bounded: a handler that waits for the report before its run would wait forever here.
    await asyncio.wait_for(handler.on_dispatched(DISPATCH), timeout=5)


async def test_the_run_begins_before_the_started_report_is_acknowledged() -> None:
    publisher = GatedPublisher()
    runner = RecordingRunner(publisher)
    await handle(sandbox(publisher, runner))
    assert runner.began_before_started_acknowledged is True
    assert publisher.sent == ["started", "completed"]


async def test_a_started_report_that_fails_fails_the_delivery_and_nothing_else_is_reported() -> (
    None
):
    publisher = GatedPublisher(fail_started=True)
    runner = RecordingRunner(publisher)
    with pytest.raises(ConnectionError):
        await handle(sandbox(publisher, runner))
    assert publisher.sent == []
