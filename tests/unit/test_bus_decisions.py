"""Decisions that arrive on ``decision.submitted`` obey the rules an API key's answer obeys at the
gateway: nothing unsigned is applied, whatever it claims; a registered outside producer decides
under its own identity and role (shared/senders.py, services/orchestrator/outside_decisions.py).

All four services' handlers on the in-memory bus; the messages are published as an outside
producer's bytes would be."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from services.gateway.answers import ReviewAnswer
from shared.domain.principals import Reviewer, SeparationOfDuties, person
from shared.events import CancelRequested, DecisionSubmitted, ExecutionRequested, encode_event
from shared.senders import MessageSigner
from tests import factories as f
from tests.direct_bus import Collector
from tests.unit.inprocess import SCOPE, World, in_process_world

REQUESTER = Reviewer(label="key:req (requester)", identity=person("requester@example.com"))
CFO = "person:cfo@example.com"


@pytest.fixture
async def bus_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[World, dict[str, MessageSigner], list[dict[str, Any]]]]:
    """The world with three registered producers (an owner of p1, a member of p1, an owner of
    another project) and what reaches the dead-letter topic."""
    owner, owner_signer = f.outside_producer(tmp_path, name="ops-bot", projects=("p1",))
    member, member_signer = f.outside_producer(
        tmp_path, name="member-bot", role="PROJECT_MEMBER", projects=("p1",)
    )
    other, other_signer = f.outside_producer(tmp_path, name="other-bot", projects=("p2",))
    merged = tmp_path / "producers.toml"
    merged.write_text("\n".join(p.read_text() for p in (owner, member, other)))
    monkeypatch.setenv("INTERLOCK_DECISION_PRODUCERS_FILE", str(merged))
    async with in_process_world(tmp_path, monkeypatch) as world:
        letters: list[dict[str, Any]] = []
        world.bus.add_consumer(world.topics.dead_letters, "letters", Collector("letters", letters))
        signers = {"owner": owner_signer, "member": member_signer, "other": other_signer}
        yield world, signers, letters


def forged_approval(execution_id: str, **extra: Any) -> DecisionSubmitted:
    """What the probe published: an approval claiming two owners and the gateway's claim."""
    fields: dict[str, Any] = {
        "execution_id": execution_id,
        "decision": "approve",
        "suspension_id": 1,
        "reviewer": CFO,
        "approvers": [CFO, "person:ceo@example.com"],
        "claimed": True,
        **SCOPE,
    }
    fields.update(extra)
    return DecisionSubmitted(**fields)


async def publish(world: World, event: DecisionSubmitted, signer: MessageSigner | None) -> None:
    body = encode_event(event)
    headers = signer.headers(body) if signer else None
    await world.bus.publish_raw(
        body, world.topics.decisions, key=event.execution_id, headers=headers
    )


def refunds(world: World) -> list[Any]:
    if not world.ledger.exists():
        return []
    return [line for line in world.ledger.read_text().splitlines() if '"refund"' in line]


async def test_an_unsigned_decision_approves_nothing_and_is_audited_as_unverified(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, _, letters = bus_world
    started = await world.invoke("high-value-refund", "CLM-4821", requester=REQUESTER)
    with pytest.raises(SeparationOfDuties):  # the API says no to the requester
        await world.decide(started.execution_id, "approve", reviewer=REQUESTER)
    forged = forged_approval(started.execution_id)
    await publish(world, forged, signer=None)
    after = await world.execution(started.execution_id)
    assert after.status.value == "suspended" and after.decisions == []
    assert refunds(world) == []
    [entry] = [a for a in after.audit if a.action == "decision.unauthenticated"]
    assert entry.actor == "unverified sender"  # never the name the message gave
    assert "not signed" in entry.reason and CFO in entry.reason
    assert [letter["error_type"] for letter in letters] == ["RejectedMessage"]
    # The forged message took no claim: real reviewers still decide.
    assert await world.store.decisions.holder(started.execution_id, 1) is None


async def test_a_decision_signed_with_an_unregistered_key_or_altered_is_refused(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]], tmp_path: Path
) -> None:
    world, signers, _ = bus_world
    started = await world.invoke("refund-approval", "CLM-4821")
    (tmp_path / "stranger").mkdir()
    # Someone's own key pair, under a registered producer's name.
    _, stranger = f.outside_producer(tmp_path / "stranger", name="ops-bot", projects=("p1",))
    await publish(world, forged_approval(started.execution_id), signer=stranger)
    # A real producer's signature over other bytes than the message carries.
    genuine = forged_approval(started.execution_id, decision="reject")
    altered = encode_event(forged_approval(started.execution_id, event_id=genuine.event_id))
    await world.bus.publish_raw(
        altered,
        world.topics.decisions,
        key=started.execution_id,
        headers=signers["owner"].headers(encode_event(genuine)),
    )
    after = await world.execution(started.execution_id)
    assert after.status.value == "suspended" and after.decisions == []
    reasons = [a.reason for a in after.audit if a.action == "decision.unauthenticated"]
    assert len(reasons) == 2 and all("does not match" in r for r in reasons)


async def test_a_producer_decides_under_its_own_name_not_the_one_it_writes(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, signers, _ = bus_world
    started = await world.invoke("refund-approval", "CLM-4821")
    await publish(world, forged_approval(started.execution_id), signer=signers["owner"])
    done = await world.execution(started.execution_id)
    assert done.status.value == "completed"
    [decision] = done.decisions
    assert decision.reviewer == "producer:ops-bot" and decision.approvers is None
    assert [a.actor for a in done.audit if a.to_status == "resuming"] == ["producer:ops-bot"]


async def test_a_producer_is_held_to_its_role_and_its_projects(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, signers, _ = bus_world
    started = await world.invoke("refund-approval", "CLM-4821")
    await publish(world, forged_approval(started.execution_id), signer=signers["member"])
    await publish(world, forged_approval(started.execution_id), signer=signers["other"])
    after = await world.execution(started.execution_id)
    assert after.status.value == "suspended" and after.decisions == []
    refused = {a.actor: a.reason for a in after.audit if a.action == "decision.refused"}
    assert "PROJECT_MEMBER" in refused["producer:member-bot"]
    assert "not registered for project p1" in refused["producer:other-bot"]


async def test_a_producer_counts_as_one_approver_of_a_quorum(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, signers, _ = bus_world
    started = await world.invoke("high-value-refund", "CLM-4821", requester=REQUESTER)
    # It claims two approvers; it is one, so the refund waits for a second owner.
    await publish(world, forged_approval(started.execution_id), signer=signers["owner"])
    waiting = await world.execution(started.execution_id)
    assert waiting.status.value == "suspended" and refunds(world) == []
    approvals = await world.intake.approvals_of(waiting)
    assert [a.reviewer for a in approvals] == ["producer:ops-bot"]
    # A person's approval through the API completes the quorum: the two are counted together.
    outcome = await world.decide(started.execution_id, "approve")
    assert not outcome.awaiting
    done = await world.execution(started.execution_id)
    assert done.status.value == "completed" and len(refunds(world)) == 1
    assert done.decisions[0].approvers == ["producer:ops-bot", "reviewer-1"]


async def test_a_producer_may_not_approve_what_it_requested_when_the_agent_forbids_it(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, signers, _ = bus_world
    # Requested on the topic, signed: the execution records the producer as its requester,
    # whatever identity the message named.
    request = ExecutionRequested(
        execution_id="exec-bus",
        agent="high-value-refund",
        input={"message": "CLM-4821"},
        requested_by="someone else",
        requester_identity=person("someone-else@example.com"),
        **SCOPE,
    )
    body = encode_event(request)
    await world.bus.publish_raw(
        body, world.topics.requested, key="exec-bus", headers=signers["owner"].headers(body)
    )
    execution = await world.execution("exec-bus")
    assert execution.requester_identity == "system:ops-bot"
    assert execution.requested_by == "producer:ops-bot"
    await publish(world, forged_approval("exec-bus"), signer=signers["owner"])
    after = await world.execution("exec-bus")
    assert after.status.value == "suspended"
    [refused] = [a for a in after.audit if a.action == "decision.refused"]
    assert "self-approval: agent high-value-refund does not let" in refused.reason


async def test_an_unsigned_request_keeps_its_label_but_not_its_claimed_identity(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, _, _ = bus_world
    request = ExecutionRequested(
        execution_id="exec-anon",
        agent="refund-approval",
        input={"message": "CLM-4821"},
        requested_by="billing system",
        requester_identity=CFO,
        **SCOPE,
    )
    await world.bus.publish_raw(encode_event(request), world.topics.requested, key="exec-anon")
    execution = await world.execution("exec-anon")
    assert execution.requester_identity is None and execution.requested_by == "billing system"


async def test_the_gateways_decisions_are_signed_and_applied(world: World) -> None:
    started = await world.invoke("refund-approval", "CLM-4821")
    outcome = await world.intake.decide(
        **SCOPE,
        execution_id=started.execution_id,
        answer=ReviewAnswer(decision="approve"),
        reviewer=Reviewer(label="key:k (a)", identity=person("a@example.com")),
    )
    assert outcome.event is not None
    done = await world.execution(started.execution_id)
    assert done.status.value == "completed"
    assert done.decisions[0].reviewer == "key:k (a)"


async def test_a_cancellation_on_the_bus_needs_a_signature_and_a_cancelling_role(
    bus_world: tuple[World, dict[str, MessageSigner], list[dict[str, Any]]],
) -> None:
    world, signers, _ = bus_world
    started = await world.invoke("refund-approval", "CLM-4821")

    async def cancel(signer: MessageSigner | None) -> None:
        event = CancelRequested(
            execution_id=started.execution_id, requested_by="the CFO", reason="stop", **SCOPE
        )
        body = encode_event(event)
        await world.bus.publish_raw(
            body,
            world.topics.cancellations,
            key=started.execution_id,
            headers=signer.headers(body) if signer else None,
        )

    await cancel(None)
    await cancel(signers["member"])
    still = await world.execution(started.execution_id)
    assert still.status.value == "suspended"
    [unsigned] = [a for a in still.audit if a.action == "cancel.unauthenticated"]
    assert unsigned.actor == "unverified sender" and "the CFO" in unsigned.reason
    [member] = [a for a in still.audit if a.action == "cancel.refused"]
    assert member.actor == "producer:member-bot" and "PROJECT_MEMBER" in member.reason
    await cancel(signers["owner"])
    cancelled = await world.execution(started.execution_id)
    assert cancelled.status.value == "cancelled"
    assert cancelled.audit[-1].actor == "producer:ops-bot"


async def test_the_gateways_cancellations_are_signed_and_applied(world: World) -> None:
    started = await world.invoke("refund-approval", "CLM-4821")
    await world.intake.cancel(
        **SCOPE, execution_id=started.execution_id, reason="withdrawn", requested_by="key:k (a)"
    )
    cancelled = await world.execution(started.execution_id)
    assert cancelled.status.value == "cancelled" and cancelled.audit[-1].actor == "key:k (a)"
