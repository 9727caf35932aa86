"""Separation of duties through every channel (issue 17): a decision has a person behind it,
whether it comes with an API key or a notification link. Checked on the gateway's intake with
the in-memory store and agents declared here."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.gateway.answers import DecisionOutcome, ReviewAnswer
from services.gateway.intake import Intake
from shared.agents import AgentRegistry, AgentSpec, ReviewRules
from shared.domain.principals import (
    Reviewer,
    SeparationOfDuties,
    check_reviewer,
    group,
    person,
)
from shared.events import DecisionSubmitted
from shared.store.api_keys import Role, create_key
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.factories import SCOPE, suspended
from tests.publishers import RecordingPublisher

FACTORY = "agents.refund_approval:build_graph"
REQUESTER = Reviewer.of_key("0000000000000001", "requester", "req@example.com")


def link(email: str, channel: str = "reviewers-email") -> Reviewer:
    return Reviewer.of_link(channel, person(email))


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def recorder() -> RecordingPublisher:
    return RecordingPublisher()


@pytest.fixture
def intake(store: InMemoryStore, recorder: RecordingPublisher) -> Intake:
    registry = AgentRegistry(
        [
            AgentSpec(name="solo", factory=FACTORY),
            AgentSpec(
                name="pair",
                factory=FACTORY,
                review=ReviewRules(self_approval=False, approvals_required=2),
            ),
            AgentSpec(
                name="pair-keys-only",
                factory=FACTORY,
                review=ReviewRules(self_approval=False, approvals_required=2, link_approvals=False),
            ),
        ]
    )
    return Intake(
        store=store,
        publisher=recorder,
        topics=Topics(""),
        registry=registry,
        signer=f.gateway_signer(),
    )


async def waiting(store: InMemoryStore, agent: str, requester: Reviewer | None = REQUESTER) -> str:
    execution = suspended(f"exec-{agent}-{uuid.uuid4().hex[:8]}").model_copy(
        update={
            "agent": agent,
            "requested_by": requester.label if requester else None,
            "requester_identity": requester.identity if requester else None,
        }
    )
    await store.executions.create(execution)
    return execution.execution_id


async def decide(
    intake: Intake, execution_id: str, reviewer: Reviewer, decision: str = "approve"
) -> DecisionOutcome:
    return await intake.decide(
        **SCOPE,
        execution_id=execution_id,
        answer=ReviewAnswer(decision=decision),
        reviewer=reviewer,
    )


def decisions(recorder: RecordingPublisher) -> list[DecisionSubmitted]:
    return [e for e in recorder.published if isinstance(e, DecisionSubmitted)]


async def refused(intake: Intake, execution_id: str, reviewer: Reviewer, decision: str) -> str:
    with pytest.raises(SeparationOfDuties) as raised:
        await decide(intake, execution_id, reviewer, decision)
    return raised.value.slug


async def test_the_requester_decides_by_no_channel(
    intake: Intake, store: InMemoryStore, recorder: RecordingPublisher
) -> None:
    execution_id = await waiting(store, "pair")
    own_other_key = Reviewer.of_key("0000000000000002", "laptop", "REQ@example.com")
    for reviewer in (REQUESTER, own_other_key, link("req@example.com")):
        for decision in ("approve", "reject"):
            assert await refused(intake, execution_id, reviewer, decision) == "self-approval"
    assert decisions(recorder) == [] and await store.approvals.list(execution_id, 1) == []


async def test_one_person_counts_once_whether_by_key_or_by_link(
    intake: Intake, store: InMemoryStore, recorder: RecordingPublisher
) -> None:
    execution_id = await waiting(store, "pair")
    await create_key(
        store.api_keys,
        project_id="proj-1",
        role=Role.OWNER,
        name="alice",
        email="alice@example.com",
        secret="ilk_00000000000000a1_" + "a" * 43,
    )
    alice_key = Reviewer.of_key("00000000000000a1", "alice", "alice@example.com")
    first = await decide(intake, execution_id, alice_key)
    assert first.awaiting and len(first.approvals) == 1
    second = await decide(intake, execution_id, link("Alice@Example.com"))
    assert second.awaiting and len(second.approvals) == 1  # the same person, twice
    assert decisions(recorder) == []
    done = await decide(intake, execution_id, link("bob@example.com", "managers-email"))
    assert not done.awaiting
    [event] = decisions(recorder)
    assert event.approvers == [
        "key:00000000000000a1 (alice)",
        "link:managers-email for bob@example.com",
    ]


async def test_two_links_cannot_approve_where_the_agent_takes_keys_only(
    intake: Intake, store: InMemoryStore, recorder: RecordingPublisher
) -> None:
    execution_id = await waiting(store, "pair-keys-only")
    for email in ("reviewers@example.com", "managers@example.com"):
        slug = await refused(intake, execution_id, link(email), "approve")
        assert slug == "link-approval-not-allowed"
    assert await store.approvals.list(execution_id, 1) == []
    rejected = await decide(intake, execution_id, link("reviewers@example.com"), "reject")
    assert not rejected.awaiting and decisions(recorder)[0].decision == "reject"


async def test_a_shared_channel_or_an_unknown_requester_keeps_links_out(
    intake: Intake, store: InMemoryStore
) -> None:
    execution_id = await waiting(store, "pair")
    slack = Reviewer.of_link("team-slack", group("slack", "team-slack"))
    assert await refused(intake, execution_id, slack, "reject") == "link-not-personal"
    anonymous_key = Reviewer.of_key("0000000000000003", "ci", None)
    unknown = await waiting(store, "pair", requester=anonymous_key)
    assert await refused(intake, unknown, link("bob@example.com"), "reject") == "requester-unknown"
    # Keys still decide it: the requester's key is known, and any other key is someone else.
    other = Reviewer.of_key("0000000000000004", "bob", None)
    assert (await decide(intake, unknown, other, "reject")).event is not None


async def test_without_separation_of_duties_any_link_decides(
    intake: Intake, store: InMemoryStore, recorder: RecordingPublisher
) -> None:
    execution_id = await waiting(store, "solo")
    slack = Reviewer.of_link("team-slack", group("slack", "team-slack"))
    outcome = await decide(intake, execution_id, slack)
    assert (
        outcome.event is not None
        and outcome.event.reviewer == "link:team-slack for group:slack:team-slack"
    )


async def test_an_approval_whose_key_was_revoked_no_longer_counts(
    intake: Intake, store: InMemoryStore, recorder: RecordingPublisher
) -> None:
    execution_id = await waiting(store, "pair")
    approvers: dict[str, Reviewer] = {}
    for name in ("ann", "ben", "cat"):
        key, _ = await create_key(store.api_keys, project_id="proj-1", role=Role.OWNER, name=name)
        approvers[name] = key.as_reviewer()
    assert (await decide(intake, execution_id, approvers["ann"])).awaiting
    assert await store.api_keys.revoke("proj-1", approvers["ann"].key_id or "")
    second = await decide(intake, execution_id, approvers["ben"])
    assert second.awaiting, "ann's approval was given, then her key revoked: it does not count"
    assert [a.reviewer for a in second.approvals] == [approvers["ben"].label]
    assert len(second.discounted) == 1 and "key revoked" in second.discounted[0]
    assert decisions(recorder) == []
    third = await decide(intake, execution_id, approvers["cat"])
    [event] = decisions(recorder)
    assert third.event is event
    assert event.approvers == [approvers["ben"].label, approvers["cat"].label]
    assert event.discounted_approvers is not None
    assert event.discounted_approvers[0].startswith(approvers["ann"].label + ": key revoked")


@pytest.mark.parametrize(
    ("requester_identity", "requester_label", "reviewer", "allowed"),
    [
        (None, "key:k1 (old)", Reviewer(label="key:k1 (old)", identity="key:k1"), False),
        (None, "key:k1 (old)", Reviewer(label="key:k2 (new)", identity="key:k2"), True),
        ("key:k1", "key:k1 (a)", Reviewer(label="key:k1 (a)", identity="key:k1"), False),
        (
            "key:k1",
            "key:k1 (a)",
            Reviewer(label="x", identity=person("a@b.c"), via_link=True),
            False,
        ),
        (person("a@b.c"), "k", Reviewer(label="x", identity=person("d@b.c"), via_link=True), True),
    ],
)
def test_check_reviewer_rules(
    requester_identity: str | None, requester_label: str, reviewer: Reviewer, allowed: bool
) -> None:
    call: dict[str, Any] = {
        "agent": "a",
        "self_approval": False,
        "requester_identity": requester_identity,
        "requester_label": requester_label,
    }
    if allowed:
        check_reviewer(reviewer, **call)
    else:
        with pytest.raises(SeparationOfDuties):
            check_reviewer(reviewer, **call)
    check_reviewer(reviewer, **{**call, "self_approval": True})  # no rule without the flag


async def test_a_quorum_reads_only_the_other_approvers_keys(
    intake: Intake, store: InMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-check costs one key read per earlier approver: the deciding key was just read."""
    execution_id = await waiting(store, "pair")
    approvers = []
    for name in ("ann", "ben"):
        key, _ = await create_key(store.api_keys, project_id="proj-1", role=Role.OWNER, name=name)
        approvers.append(key.as_reviewer())
    reads: list[str] = []
    original = store.api_keys.get

    async def counted(key_id: str) -> Any:
        reads.append(key_id)
        return await original(key_id)

    monkeypatch.setattr(store.api_keys, "get", counted)
    assert (await decide(intake, execution_id, approvers[0])).awaiting
    assert reads == []
    assert not (await decide(intake, execution_id, approvers[1])).awaiting
    assert reads == [approvers[0].key_id]
