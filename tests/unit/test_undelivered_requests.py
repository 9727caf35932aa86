"""An invoke whose event never reached the bus (the broker is down: the client is answered 503)
is marked undelivered; a retry with its idempotency key delivers it; a request nobody retries is
abandoned by the orchestrator's sweep instead of staying pending forever, and a late copy of it
is then ignored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from services.gateway.intake import Intake
from services.orchestrator import state_machine as sm
from services.orchestrator.abandoned import AbandonedRequests
from services.orchestrator.handlers import Orchestrator
from shared.agents import load_registry
from shared.domain.execution import ExecutionStatus
from shared.events import AgentInput, utc_now
from shared.settings import CommonSettings
from tests import factories as f
from tests.unit.inprocess import SCOPE, World


class BrokerDown:
    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        raise TimeoutError("the broker did not acknowledge")


def intake_without_broker(world: World) -> Intake:
    registry = load_registry(CommonSettings().agents_file)
    return Intake(
        store=world.store,
        publisher=BrokerDown(),
        topics=world.topics,
        registry=registry,
        signer=f.gateway_signer(),
    )


async def invoke(intake: Intake, key: str) -> str:
    execution = await intake.invoke(
        **SCOPE,
        agent="refund-approval",
        agent_input=AgentInput(message="Refund claim CLM-4821"),
        idempotency_key=key,
        requested_by="tester",
    )
    return execution.execution_id


async def undelivered_id(world: World, key: str) -> str:
    with pytest.raises(TimeoutError):
        await invoke(intake_without_broker(world), key)
    page = await world.store.executions.list("p1", "w1")
    (execution,) = [e for e in page.items if e.idempotency_key == key]
    assert execution.status is ExecutionStatus.PENDING and execution.epoch == 0
    assert execution.undelivered_since is not None
    return execution.execution_id


async def test_a_retry_with_the_key_delivers_the_request(world: World) -> None:
    execution_id = await undelivered_id(world, "retry-me")
    assert await invoke(world.intake, "retry-me") == execution_id
    delivered = await world.execution(execution_id)
    assert delivered.status is ExecutionStatus.SUSPENDED
    assert delivered.undelivered_since is None


def sweep_of(world: World, after: timedelta) -> AbandonedRequests:
    orchestrator = Orchestrator(
        store=world.store,
        publisher=_NoPublisher(),
        topics=world.topics,
        registry=load_registry(CommonSettings().agents_file),
    )
    return AbandonedRequests(
        executions=world.store.executions,
        orchestrator=orchestrator,
        clock=utc_now,
        abandon_after=after,
    )


class _NoPublisher:
    def __init__(self) -> None:
        self.published: list[BaseModel] = []

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        self.published.append(event)


async def test_a_request_nobody_retries_is_abandoned_and_a_late_copy_ignored(
    world: World,
) -> None:
    execution_id = await undelivered_id(world, "given-up")
    assert await sweep_of(world, timedelta(minutes=10)).sweep() == 0  # not for long enough
    assert (await world.execution(execution_id)).status is ExecutionStatus.PENDING

    assert await sweep_of(world, timedelta(0)).sweep() == 1
    ended = await world.execution(execution_id)
    assert ended.status is ExecutionStatus.ERROR
    assert ended.error is not None and ended.error["error_type"] == "RequestNotDelivered"
    assert await sweep_of(world, timedelta(0)).sweep() == 0  # once

    # The publish that timed out may still land: the request is then a duplicate.
    late = f.requested(execution_id).model_copy(update={"project_id": "p1", "workspace_id": "w1"})
    assert sm.on_requested(ended, late).ignored is not None
    # A retry of the abandoned request gets the ended execution back, not a second run.
    assert await invoke(world.intake, "given-up") == execution_id
    assert (await world.execution(execution_id)).status is ExecutionStatus.ERROR
    assert world.dispatches == []


async def test_delivered_requests_are_never_abandoned(world: World) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821", key="fine")
    assert await sweep_of(world, timedelta(0)).sweep() == 0
    assert (await world.execution(started.execution_id)).status is ExecutionStatus.SUSPENDED
