"""What a decision is judged against (services/gateway/intake.py, ``_to_decide``): one read of
the head when it shows a suspension, and never a refusal that rests on a head trailing the log.
The in-memory store has no head, so one is played here: ``min_epoch=0`` answers from it."""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.answers import ReviewAnswer
from services.gateway.intake import Intake
from shared.agents import AgentRegistry, AgentSpec
from shared.domain.decisions import NotSuspended
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import DecisionSubmitted
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.factories import SCOPE, suspended
from tests.publishers import RecordingPublisher


class TrailingHead:
    """The store's executions, with a head that may be set behind the newest version."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store.executions
        self.head: Execution | None = None
        self.reads: list[int | None] = []

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        self.reads.append(min_epoch)
        if min_epoch == 0 and self.head is not None:
            return self.head
        return await self._store.get(project_id, execution_id, min_epoch=min_epoch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def executions(store: InMemoryStore) -> TrailingHead:
    trailing = TrailingHead(store)
    store.executions = trailing  # type: ignore[assignment]
    return trailing


@pytest.fixture
def recorder() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def intake(store: InMemoryStore, recorder: RecordingPublisher, executions: TrailingHead) -> Intake:
    registry = AgentRegistry([AgentSpec(name="solo", factory="agents.refund_approval:build_graph")])
    return Intake(
        store=store,
        publisher=recorder,
        topics=Topics(""),
        registry=registry,
        signer=f.gateway_signer(),
    )


async def waiting(executions: TrailingHead) -> Execution:
    execution = suspended("exec-reads").model_copy(update={"agent": "solo"})
    created, _ = await executions.create(execution)
    return created


async def test_a_head_showing_the_suspension_is_read_once(
    intake: Intake, executions: TrailingHead, recorder: RecordingPublisher
) -> None:
    await waiting(executions)
    await intake.decide(
        **SCOPE, execution_id="exec-reads", answer=ReviewAnswer(decision="approve"), reviewer=None
    )
    assert executions.reads == [0]
    assert [type(e) for e in recorder.published] == [DecisionSubmitted]


async def test_a_trailing_head_is_read_past_before_a_refusal(
    intake: Intake, executions: TrailingHead, recorder: RecordingPublisher
) -> None:
    created = await waiting(executions)
    # The head still shows the version before the suspension (its writer is between its
    # insert and its head write, or died there).
    executions.head = created.model_copy(update={"status": ExecutionStatus.RUNNING})
    await intake.decide(
        **SCOPE, execution_id="exec-reads", answer=ReviewAnswer(decision="approve"), reviewer=None
    )
    assert executions.reads == [0, None]
    assert [type(e) for e in recorder.published] == [DecisionSubmitted]


async def test_an_execution_that_is_not_suspended_is_refused_on_the_newest_version(
    intake: Intake, executions: TrailingHead, recorder: RecordingPublisher
) -> None:
    created = await waiting(executions)
    running = await executions.replace(
        created, created.model_copy(update={"status": ExecutionStatus.RUNNING, "epoch": 2})
    )
    assert running is not None
    with pytest.raises(NotSuspended):
        await intake.decide(
            **SCOPE,
            execution_id="exec-reads",
            answer=ReviewAnswer(decision="approve"),
            reviewer=None,
        )
    assert executions.reads == [0, None]
    assert recorder.published == []
