"""The whole lifecycle with no I/O: the four services' handlers on the synchronous in-memory bus
(the ``world`` fixture, tests/unit/inprocess.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agents.ledger import read_all
from services.gateway.errors import DecisionConflict
from services.orchestrator.app import OrchestratorSettings
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import SandboxSettings
from shared.domain.decisions import DecisionNotAllowed, NotSuspended
from shared.domain.execution import ExecutionStatus
from shared.events import AgentInput, DecisionSubmitted, ExecutionRequested, encode_event
from shared.store.memory import InMemoryStore
from shared.store.ports import Claim
from tests import factories as f
from tests.direct_bus import Collector, DirectBus
from tests.unit.inprocess import World

SCOPE = {"project_id": "p1", "workspace_id": "w1"}


async def test_refund_is_suspended_then_approved(world: World) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    suspended = await world.execution(started.execution_id)
    assert suspended.status is ExecutionStatus.SUSPENDED
    assert suspended.suspension is not None
    assert suspended.suspension.suspend_context["claim_id"] == "CLM-4821"
    assert read_all(world.ledger) == []

    await world.decide(started.execution_id, "Approve", "ok")
    done = await world.execution(started.execution_id)
    assert done.status is ExecutionStatus.COMPLETED
    assert done.result["outcome"] == "refunded"
    assert [e["kind"] for e in read_all(world.ledger)] == ["refund"]
    assert done.decisions[0].reviewer == "reviewer-1"


async def test_the_stored_suspension_has_the_graphs_state_and_raw_interrupts(world: World) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    suspension = (await world.execution(started.execution_id)).suspension
    assert suspension is not None and suspension.values is not None
    assert suspension.values["claim_id"] == "CLM-4821"
    [message] = suspension.values["messages"]
    assert (message["type"], message["role"], message["content"]) == (
        "human",
        "user",
        "Refund claim CLM-4821",
    )
    [interrupt] = suspension.interrupts
    assert interrupt.interrupt_id == suspension.interrupt_ids[0]
    assert interrupt.value == suspension.suspend_context


async def test_gateway_rules_hold_without_infrastructure(world: World) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    with pytest.raises(DecisionNotAllowed):
        await world.decide(started.execution_id, "escalate")
    await world.decide(started.execution_id, "reject", "no")
    with pytest.raises(NotSuspended):
        await world.decide(started.execution_id, "approve")
    done = await world.execution(started.execution_id)
    assert done.status is ExecutionStatus.COMPLETED and done.result["outcome"] == "rejected"


async def test_a_second_decision_on_one_suspension_conflicts(world: World) -> None:
    started = await world.invoke("chain-approval", "2")
    execution = await world.execution(started.execution_id)
    assert execution.suspension is not None
    # A concurrent reviewer's gateway claimed the suspension first with another decision (and
    # died before publishing it: a gateway's claim says ``claimed``).
    suspension_id = execution.suspension.suspension_id
    rival = DecisionSubmitted(
        execution_id=started.execution_id,
        decision="reject",
        suspension_id=suspension_id,
        claimed=True,
        **SCOPE,
    )
    claim = Claim(rival.decision_id, rival.model_dump_json())
    await world.store.decisions.claim(started.execution_id, suspension_id, claim)
    with pytest.raises(DecisionConflict):
        await world.decide(started.execution_id, "approve")
    # The rival's decision is the one applied (the conflict re-drove its event).
    after = await world.execution(started.execution_id)
    assert [d.decision for d in after.decisions] == ["reject"]
    assert after.status is ExecutionStatus.COMPLETED


async def test_idempotent_invoke_returns_the_same_execution(world: World) -> None:
    first = await world.invoke("refund-approval", "CLM-4821", key="k-1")
    second = await world.invoke("refund-approval", "CLM-4821", key="k-1")
    assert first.execution_id == second.execution_id
    assert len((await world.store.executions.list("p1", "w1")).items) == 1


async def test_redelivered_events_make_no_second_transition_or_dispatch(world: World) -> None:
    started = await world.invoke("refund-approval", "CLM-4821")
    execution = await world.execution(started.execution_id)
    request = next(a for a in execution.audit if a.action == "created")
    requested = ExecutionRequested(
        event_id=str(request.event_id),
        execution_id=execution.execution_id,
        agent=execution.agent,
        input=execution.input,
        **SCOPE,
    )
    await world.decide(started.execution_id, "approve")
    done = await world.execution(started.execution_id)
    decision = DecisionSubmitted(
        execution_id=done.execution_id,
        decision="approve",
        decision_id=done.decisions[0].decision_id,
        suspension_id=1,
        **SCOPE,
    )
    signed = f.gateway_signer().headers(encode_event(decision))  # the gateway's own decision
    for _ in range(2):
        await world.bus.publish_raw(encode_event(requested), world.topics.requested, key="k")
        await world.bus.publish_raw(
            encode_event(decision), world.topics.decisions, key="k", headers=signed
        )
    again = await world.execution(started.execution_id)
    assert again == done
    assert [(d["kind"], d["epoch"]) for d in world.dispatches] == [("start", 1), ("resume", 2)]
    assert [e["kind"] for e in read_all(world.ledger)] == ["refund"]


async def test_a_redelivered_request_sends_the_same_dispatch_again(tmp_path: Path) -> None:
    """Orchestrator alone (no sandbox): the execution stays pending, and each redelivery of its
    request re-drives the dispatch (it may have been lost to a crash after the write; nothing
    records what was sent). It is the same command, which the sandbox recognises by its epoch;
    the execution does not change."""
    settings = SandboxSettings(kafka_bootstrap_servers="unused:9092", topic_prefix="solo.")
    bus = DirectBus()
    store = InMemoryStore()
    orchestrator_settings = OrchestratorSettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="solo."
    )
    register_orchestrator(
        bus, orchestrator_settings, store, bus, erase_checkpoints=saver_eraser(InMemorySaver())
    )
    sent: list[dict[str, Any]] = []
    bus.add_consumer(settings.topics.dispatched, "observer", Collector("observer", sent))

    event = ExecutionRequested(
        execution_id="solo-1", agent="refund-approval", input=AgentInput(message="x"), **SCOPE
    )
    for _ in range(3):
        await bus.publish_raw(encode_event(event), settings.topics.requested, key="solo-1")
    stored = await store.executions.get("p1", "solo-1")
    assert stored is not None and (stored.status, stored.epoch) == (ExecutionStatus.PENDING, 1)
    assert stored.version == 2
    once = ("solo-1:dispatch:1", 1, "start")
    assert [(d["event_id"], d["epoch"], d["kind"]) for d in sent] == [once] * 3
