"""The orchestrator erases a deleted thread's turns (services/orchestrator/thread_erasure.py):
only on a gateway's signed request, only turns that ended (a later one too, started while the
gateway deleted), checkpoints and store records both, by the policy on the audit, and again
harmlessly on a redelivery."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.orchestrator.thread_erasure import ThreadEraser
from shared.domain.execution import Execution, ExecutionStatus, new_pending_execution
from shared.domain.threads import turn_execution_id
from shared.errors import RejectedMessage
from shared.events import AgentInput, ExecutionRequested, ThreadDeleteRequested, ThreadTurn
from shared.senders import ProducerSender, Unverified
from shared.store.api_keys import Role
from shared.store.memory import InMemoryStore
from shared.store.ports import StepRecord
from tests import factories as f

SCOPE = f.SCOPE
THREAD = "t-erase"


def turn_id(number: int, thread: str = THREAD) -> str:
    return turn_execution_id(SCOPE["project_id"], SCOPE["workspace_id"], thread, number)


async def stored_turn(
    store: InMemoryStore, number: int, status: ExecutionStatus, thread: str = THREAD
) -> Execution:
    request = ExecutionRequested(
        execution_id=turn_id(number, thread),
        agent="conversation",
        input=AgentInput(message=f"m{number}", turn=ThreadTurn(thread_id=thread, turn=number)),
        **SCOPE,
    )
    execution, _ = await store.executions.create(new_pending_execution(request, None))
    if status is not ExecutionStatus.PENDING:
        ended = execution.model_copy(update={"status": status, "version": execution.version + 1})
        replaced = await store.executions.replace(execution, ended)
        assert replaced is not None
        execution = replaced
    await store.steps.put(
        StepRecord(
            key=f"{execution.execution_id}:step",
            execution_id=execution.execution_id,
            name="send_email",
            result="null",
            epoch=1,
            attempt=1,
        )
    )
    return execution


class Checkpoints:
    def __init__(self) -> None:
        self.erased: list[str] = []

    async def __call__(self, thread_ids: Sequence[str]) -> None:
        self.erased.extend(thread_ids)


def request(*numbers: int) -> ThreadDeleteRequested:
    return ThreadDeleteRequested(
        execution_id=turn_id(1),
        thread_id=THREAD,
        execution_ids=[turn_id(n) for n in numbers],
        requested_by="key:owner",
        **SCOPE,
    )


@pytest.mark.parametrize("keep_audit", [True, False])
async def test_ended_turns_are_erased_and_a_later_one_too(keep_audit: bool) -> None:
    store = InMemoryStore()
    for number in (1, 2, 3):
        await stored_turn(store, number, ExecutionStatus.COMPLETED)
    other = await stored_turn(store, 1, ExecutionStatus.COMPLETED, thread="t-other")
    checkpoints = Checkpoints()
    eraser = ThreadEraser(store=store, checkpoints=checkpoints, keep_audit=keep_audit)

    # The gateway listed two turns; the third started while it deleted, and ended.
    await eraser.on_delete_requested(request(1, 2), f.GATEWAY)

    assert checkpoints.erased == [turn_id(1), turn_id(2), turn_id(3)]
    for number in (1, 2, 3):
        assert await store.steps.load(turn_id(number)) == {}
        kept = await store.executions.get(SCOPE["project_id"], turn_id(number))
        assert (kept is not None) is keep_audit
    assert await store.steps.load(other.execution_id) != {}
    assert await store.executions.get(SCOPE["project_id"], other.execution_id) is not None

    # A redelivery erases again, harmlessly.
    await eraser.on_delete_requested(request(1, 2), f.GATEWAY)
    assert checkpoints.erased[3:] == [turn_id(1), turn_id(2)] + ([turn_id(3)] if keep_audit else [])


async def test_a_turn_that_has_not_ended_is_left_alone() -> None:
    store = InMemoryStore()
    await stored_turn(store, 1, ExecutionStatus.COMPLETED)
    await stored_turn(store, 2, ExecutionStatus.PENDING)
    checkpoints = Checkpoints()
    eraser = ThreadEraser(store=store, checkpoints=checkpoints, keep_audit=False)

    await eraser.on_delete_requested(request(1, 2), f.GATEWAY)

    assert checkpoints.erased == [turn_id(1)]
    assert await store.executions.get(SCOPE["project_id"], turn_id(1)) is None
    waiting = await store.executions.get(SCOPE["project_id"], turn_id(2))
    assert waiting is not None and waiting.status is ExecutionStatus.PENDING
    assert await store.steps.load(turn_id(2)) != {}


@pytest.mark.parametrize(
    "sender",
    [
        Unverified("no signature"),
        ProducerSender(name="billing-bot", role=Role.OWNER, projects=(SCOPE["project_id"],)),
    ],
    ids=["unsigned", "registered-producer"],
)
async def test_only_a_gateway_signed_request_erases(sender: Unverified | ProducerSender) -> None:
    store = InMemoryStore()
    await stored_turn(store, 1, ExecutionStatus.COMPLETED)
    checkpoints = Checkpoints()
    eraser = ThreadEraser(store=store, checkpoints=checkpoints, keep_audit=False)

    with pytest.raises(RejectedMessage, match="gateway's signed request"):
        await eraser.on_delete_requested(request(1), sender)

    assert checkpoints.erased == []
    assert await store.executions.get(SCOPE["project_id"], turn_id(1)) is not None
    assert await store.steps.load(turn_id(1)) != {}
