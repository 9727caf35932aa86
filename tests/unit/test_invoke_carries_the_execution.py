"""The gateway's request carries the execution as it stored it (``stored_as``), so the
orchestrator need not read it back; one too large to carry twice goes without it."""

from __future__ import annotations

from services.gateway.intake import Intake
from shared.agents import load_registry
from shared.domain.execution import Execution
from shared.events import MAX_STORED_AS_CHARS, AgentInput, ExecutionRequested
from shared.settings import CommonSettings
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.publishers import RecordingPublisher


def intake(store: InMemoryStore, publisher: RecordingPublisher) -> Intake:
    return Intake(
        store=store,
        publisher=publisher,
        topics=Topics(""),
        registry=load_registry(CommonSettings().agents_file),
        signer=f.gateway_signer(),
    )


async def requested(message: str) -> tuple[ExecutionRequested, Execution | None]:
    store, publisher = InMemoryStore(), RecordingPublisher()
    execution = await intake(store, publisher).invoke(
        project_id="p1",
        workspace_id="w1",
        agent="refund-approval",
        agent_input=AgentInput(message=message),
        idempotency_key=None,
        requested_by="tester",
    )
    (event,) = publisher.published
    assert isinstance(event, ExecutionRequested)
    return event, await store.executions.get("p1", execution.execution_id)


async def test_a_request_carries_its_execution_as_stored() -> None:
    event, stored = await requested("Refund claim CLM-4821")
    assert event.stored_as is not None and stored is not None
    assert Execution.model_validate_json(event.stored_as) == stored


async def test_a_large_request_goes_without_it() -> None:
    event, stored = await requested("x" * MAX_STORED_AS_CHARS)
    assert event.stored_as is None and stored is not None
