"""Signed approve / reject links: minted per recipient when a notification is sent, followed at
the gateway. A GET only asks to confirm; the first POST spends the link whatever happens; the
decision is the recipient's, under separation of duties; reuse, expiry and tampering get a page
and no decision."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from services.gateway import app as gateway_app
from services.gateway.action_links import install_action_links
from services.gateway.app import GatewaySettings, create_app
from services.gateway.intake import Intake
from services.gateway.problems import install_problem_handlers
from shared.agents import AgentRegistry, AgentSpec, ReviewRules
from shared.domain.execution import ExecutionStatus
from shared.domain.principals import Reviewer, group, person
from shared.events import DecisionSubmitted
from shared.notifications.action_links import (
    ActionLink,
    LinkExpired,
    LinkInvalid,
    LinkMinter,
    sign,
    verify,
)
from shared.notifications.model import Notification
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.factories import SCOPE, suspended
from tests.publishers import RecordingPublisher
from tests.unit.inprocess import World

SECRET = "test-action-link-secret-of-some-length"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALICE = person("alice@example.com")


def link(**changes: object) -> ActionLink:
    base = ActionLink(
        link_id="link-1",
        project_id="p1",
        workspace_id="w1",
        execution_id="exec-1",
        generation=1,
        decision="approve",
        channel="reviewers",
        recipient=ALICE,
        expires_at=NOW + timedelta(days=1),
    )
    return base.model_copy(update=changes)


def notification(execution_id: str = "exec-1", **changes: object) -> Notification:
    base = Notification(
        notification_id=f"{execution_id}:1:reviewers",
        project_id="p1",
        workspace_id="w1",
        execution_id=execution_id,
        agent="refund-approval",
        suspension_id=1,
        allowed_decisions=["approve", "reject"],
        link_decisions=["approve", "reject"],
        review_url="http://gateway/reviews",
    )
    return base.model_copy(update=changes)


def test_a_signed_link_verifies_and_carries_its_decision_and_recipient() -> None:
    verified = verify(sign(link(), SECRET), SECRET, now=NOW)
    assert verified == link() and verified.recipient == ALICE


def test_an_altered_foreign_or_old_format_link_is_invalid() -> None:
    token = sign(link(), SECRET)
    with pytest.raises(LinkInvalid):
        verify(token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1], SECRET, now=NOW)
    with pytest.raises(LinkInvalid):
        verify(token, "another-deployment-secret", now=NOW)
    with pytest.raises(LinkInvalid):
        verify("not-a-token", SECRET, now=NOW)


def test_minted_links_are_the_recipients_own_and_expire_with_the_suspension() -> None:
    minter = LinkMinter(
        secret=SECRET, base_url="https://interlock.example.test/", clock=lambda: NOW
    )
    waiting = notification(deadline=NOW + timedelta(hours=2))
    links = minter.links(waiting, channel="reviewers", recipient=ALICE)
    assert sorted(links) == ["approve", "reject"]
    token = links["approve"].removeprefix("https://interlock.example.test/act/")
    verified = verify(token, SECRET, now=NOW + timedelta(hours=1))
    assert (verified.decision, verified.recipient, verified.generation) == ("approve", ALICE, 1)
    with pytest.raises(LinkExpired):
        verify(token, SECRET, now=NOW + timedelta(hours=2))
    again = minter.links(waiting, channel="reviewers", recipient=ALICE)["approve"]
    assert again != links["approve"]  # every link has an id of its own, spent on its own


def test_only_the_named_decisions_get_links() -> None:
    minter = LinkMinter(secret=SECRET, base_url="http://gateway")
    assert sorted(
        minter.links(notification(link_decisions=["reject"]), channel="c", recipient=ALICE)
    ) == ["reject"]
    plain = notification(link_decisions=[])
    assert minter.with_links(plain, channel="c", recipient=ALICE) is plain


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", action_link_secret=SECRET
    )
    app = create_app(settings, store=world.store, publisher=world.bus)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


async def links_of(
    world: World,
    agent: str = "refund-approval",
    *,
    recipient: str = ALICE,
    requester: Reviewer | None = None,
) -> tuple[str, dict[str, str]]:
    started = await world.invoke(
        agent, "Refund claim CLM-4821", **({"requester": requester} if requester else {})
    )
    minter = LinkMinter(secret=SECRET, base_url="http://gateway")
    links = minter.links(
        notification(started.execution_id), channel="reviewers", recipient=recipient
    )
    return started.execution_id, {d: url.removeprefix("http://gateway") for d, url in links.items()}


async def test_following_a_link_asks_first_then_decides_once_as_its_recipient(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id, links = await links_of(world)
    confirm = await http.get(links["approve"])
    assert confirm.status_code == 200
    assert "Confirm: approve" in confirm.text and "CLM-4821" in confirm.text
    assert "default-src 'self'" in confirm.headers["content-security-policy"]
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED  # GET only

    decided = await http.post(links["approve"])
    assert decided.status_code == 200 and "Recorded: approve" in decided.text
    done = await world.execution(execution_id)
    assert done.status is ExecutionStatus.COMPLETED and done.result["outcome"] == "refunded"
    assert done.decisions[0].reviewer == "link:reviewers for alice@example.com"

    again = await http.post(links["approve"])
    assert again.status_code == 409 and "used already" in again.text
    assert (await http.get(links["approve"])).status_code == 409
    other = await http.post(links["reject"])
    assert other.status_code == 409 and "already been decided" in other.text
    assert len((await world.execution(execution_id)).decisions) == 1
    assert await world.store.spent_links.spent(
        verify(links["reject"].removeprefix("/act/"), SECRET).link_id
    )


async def test_a_refused_link_is_spent_all_the_same(world: World, http: httpx.AsyncClient) -> None:
    requester = Reviewer(label="key:req (alice)", identity=ALICE)
    execution_id, links = await links_of(world, "high-value-refund", requester=requester)
    own = await http.post(links["reject"])  # the requester's own email
    assert own.status_code == 403 and "another owner" in own.text
    again = await http.post(links["reject"])
    assert again.status_code == 409 and "used already" in again.text
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED


async def test_links_cannot_approve_where_the_agent_takes_keys_only(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id, reviewers = await links_of(
        world, "high-value-refund", recipient=person("reviewers@example.com")
    )
    _, managers = await links_of(
        world, "high-value-refund", recipient=person("managers@example.com")
    )
    for links in (reviewers, managers):
        refused = await http.post(links["approve"])
        assert refused.status_code == 403 and "only from API keys" in refused.text
    assert await world.store.approvals.list(execution_id, 1) == []
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED


async def test_a_shared_channels_link_cannot_decide_under_separation_of_duties(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id, links = await links_of(
        world, "high-value-refund", recipient=group("slack", "team-slack")
    )
    refused = await http.post(links["reject"])
    assert refused.status_code == 403 and "anyone who reads it" in refused.text
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED


async def test_expired_altered_and_disabled_links_decide_nothing(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id, links = await links_of(world)
    expired = sign(
        link(execution_id=execution_id, expires_at=datetime.now(UTC) - timedelta(minutes=1)),
        SECRET,
    )
    assert (await http.post(f"/act/{expired}")).status_code == 410
    token = links["approve"].removeprefix("/act/")
    altered = token[:10] + ("x" if token[10] != "x" else "y") + token[11:]
    response = await http.post(f"/act/{altered}")
    assert response.status_code == 400 and "not valid" in response.text
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED

    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    plain = create_app(settings, store=world.store, publisher=world.bus)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=plain), base_url="http://gateway"
    ) as client:
        assert (await client.post(links["approve"])).status_code == 404
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED


async def test_an_approval_toward_a_quorum_says_how_many_more_it_needs() -> None:
    store = InMemoryStore()
    registry = AgentRegistry(
        [
            AgentSpec(
                name="pair",
                factory="agents.refund_approval:build_graph",
                review=ReviewRules(self_approval=False, approvals_required=2),
            )
        ]
    )
    recorder = RecordingPublisher()
    intake = Intake(
        store=store,
        publisher=recorder,
        topics=Topics(""),
        registry=registry,
        signer=f.gateway_signer(),
    )
    requester = {"requested_by": "key:req", "requester_identity": person("req@example.com")}
    waiting = suspended("exec-pair").model_copy(update={"agent": "pair", **requester})
    await store.executions.create(waiting)
    app = FastAPI()
    install_problem_handlers(app)
    install_action_links(app, intake, store.spent_links, SECRET)

    def approve_link(email: str) -> str:
        scope = {"execution_id": "exec-pair", **SCOPE}
        expires_at = datetime.now(UTC) + timedelta(hours=1)
        made = link(link_id=email, recipient=person(email), expires_at=expires_at, **scope)
        return "/act/" + sign(made, SECRET)

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        first = await http.post(approve_link("ann@example.com"))
        assert first.status_code == 200 and "Approval recorded" in first.text
        assert "needs 2 approvals: 1 so far, 1 more is needed" in first.text
        assert "The agent resumes" not in first.text
        assert not [e for e in recorder.published if isinstance(e, DecisionSubmitted)]
        second = await http.post(approve_link("ben@example.com"))
        assert second.status_code == 200 and "The agent resumes." in second.text
    [decided] = [e for e in recorder.published if isinstance(e, DecisionSubmitted)]
    assert decided.approvers is not None and len(decided.approvers) == 2
