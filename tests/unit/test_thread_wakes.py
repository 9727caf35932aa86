"""The orchestrator starts a thread's queued turn when the turn before it ends, and a crash
between storing that start and sending its dispatch loses nothing: the ended turn's redelivered
report sends the dispatch again (found by the chaos scenario ``sigkill-during-conversations``)."""

from __future__ import annotations

from services.orchestrator.handlers import Orchestrator
from shared.agents import load_registry
from shared.domain.execution import Execution, ExecutionStatus, new_pending_execution
from shared.domain.threads import turn_execution_id, turn_key
from shared.events import (
    AgentInput,
    ExecutionDispatched,
    ExecutionReported,
    ExecutionRequested,
    ReportOutcome,
    ThreadTurn,
    utc_now,
)
from shared.settings import CommonSettings
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.publishers import RecordingPublisher

SCOPE = f.SCOPE


def turn_request(number: int) -> ExecutionRequested:
    execution_id = turn_execution_id(SCOPE["project_id"], SCOPE["workspace_id"], "t", number)
    before = (
        turn_execution_id(SCOPE["project_id"], SCOPE["workspace_id"], "t", number - 1)
        if number > 1
        else None
    )
    turn = ThreadTurn(thread_id="t", turn=number, after=before, base=before)
    return ExecutionRequested(
        execution_id=execution_id,
        agent="conversation",
        input=AgentInput(message=f"message {number}", turn=turn),
        idempotency_key=turn_key("t", number),
        **SCOPE,
    )


def orchestrator(store: InMemoryStore, publisher: RecordingPublisher) -> Orchestrator:
    return Orchestrator(
        store=store,
        publisher=publisher,
        topics=Topics(""),
        registry=load_registry(CommonSettings().agents_file),
    )


def dispatched(publisher: RecordingPublisher) -> list[tuple[str, int]]:
    return [
        (e.execution_id, e.epoch) for e in publisher.published if isinstance(e, ExecutionDispatched)
    ]


async def latest(store: InMemoryStore, execution_id: str) -> Execution:
    found = await store.executions.get(SCOPE["project_id"], execution_id)
    assert found is not None
    return found


async def test_a_queued_turn_starts_when_the_one_before_ends_and_again_after_a_crash() -> None:
    store, publisher = InMemoryStore(), RecordingPublisher()
    replica = orchestrator(store, publisher)
    first, second = turn_request(1), turn_request(2)
    for request in (first, second):
        await store.executions.create(new_pending_execution(request, None))
    await replica.on_requested(first, f.GATEWAY)
    await replica.on_requested(second, f.GATEWAY)
    # Turn 2 waits: only turn 1 is dispatched.
    assert dispatched(publisher) == [(first.execution_id, 1)]
    assert (await latest(store, second.execution_id)).epoch == 0

    ended = ExecutionReported(
        execution_id=first.execution_id, epoch=1, outcome=ReportOutcome.COMPLETED, **SCOPE
    )
    await replica.on_reported(ended)
    assert (await latest(store, first.execution_id)).status is ExecutionStatus.COMPLETED
    assert dispatched(publisher)[-1] == (second.execution_id, 1)

    # A replica that stored turn 2's start and died before sending it: the ended turn's report
    # comes again (to a replica that knows nothing), and turn 2's dispatch is sent again.
    publisher.published.clear()
    restarted = orchestrator(store, publisher)
    await restarted.on_reported(ended)
    assert dispatched(publisher) == [(second.execution_id, 1)]
    assert (await latest(store, second.execution_id)).status is ExecutionStatus.PENDING


async def test_a_queued_turn_its_client_was_told_503_for_is_left_to_be_abandoned() -> None:
    """A turn whose request never reached the bus was answered 503; the client's retry is a turn
    of its own. Started too, the message would run twice: it is left to the sweep that ends
    undelivered requests, and the turn after it waits for that."""
    store, publisher = InMemoryStore(), RecordingPublisher()
    replica = orchestrator(store, publisher)
    first, second = turn_request(1), turn_request(2)
    await store.executions.create(new_pending_execution(first, None))
    undelivered = new_pending_execution(second, None).model_copy(
        update={"undelivered_since": utc_now()}
    )
    await store.executions.create(undelivered)
    await replica.on_requested(first, f.GATEWAY)
    ended = ExecutionReported(
        execution_id=first.execution_id, epoch=1, outcome=ReportOutcome.COMPLETED, **SCOPE
    )
    await replica.on_reported(ended)
    assert dispatched(publisher) == [(first.execution_id, 1)]
    assert (await latest(store, second.execution_id)).epoch == 0
