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

    async def run(self, command: Any, headers: Any, admit: Any) -> tuple[Any, None]:
        # As the real runner: nothing runs before the command is admitted.
        assert await admit()
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

    async def unchanged_since(*_: Any) -> bool:
        return True

    store: Any = SimpleNamespace(
        executions=SimpleNamespace(get=get, unchanged_since=unchanged_since)
    )
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


VERSIONED = DISPATCH.model_copy(update={"execution_version": 2})
"""A command of an orchestrator that names the version it came from: checked by one point read
while the run begins, instead of a read of the execution before it."""


async def handle(handler: Sandbox, dispatch: ExecutionDispatched = DISPATCH) -> None:
    # Bounded: a handler that waits for the report before its run would wait forever here.
    await asyncio.wait_for(handler.on_dispatched(dispatch), timeout=5)


@pytest.mark.parametrize("dispatch", [DISPATCH, VERSIONED], ids=["older", "versioned"])
async def test_the_run_begins_before_the_started_report_is_acknowledged(
    dispatch: ExecutionDispatched,
) -> None:
    publisher = GatedPublisher()
    runner = RecordingRunner(publisher)
    await handle(sandbox(publisher, runner), dispatch)
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
