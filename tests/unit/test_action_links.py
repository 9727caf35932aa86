"""Signed approve / reject links: made by the notifier, followed at the gateway. A GET only asks
to confirm; the POST decides once; reuse, expiry and tampering get a page and no decision."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.bus import KafkaPublisher
from shared.domain.execution import ExecutionStatus
from shared.notifications.action_links import (
    ActionLink,
    LinkExpired,
    LinkInvalid,
    links_for,
    sign,
    verify,
)
from tests.unit.inprocess import World

SECRET = "test-action-link-secret-of-some-length"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def link(**changes: object) -> ActionLink:
    base = ActionLink(
        project_id="p1",
        workspace_id="w1",
        execution_id="exec-1",
        generation=1,
        decision="approve",
        channel="reviewers",
        expires_at=NOW + timedelta(days=1),
    )
    return base.model_copy(update=changes)


def test_a_signed_link_verifies_and_carries_its_decision() -> None:
    assert verify(sign(link(), SECRET), SECRET, now=NOW) == link()


def test_an_altered_or_foreign_link_is_invalid() -> None:
    token = sign(link(), SECRET)
    with pytest.raises(LinkInvalid):
        verify(token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1], SECRET, now=NOW)
    with pytest.raises(LinkInvalid):
        verify(token, "another-deployment-secret", now=NOW)
    with pytest.raises(LinkInvalid):
        verify("not-a-token", SECRET, now=NOW)


def test_a_link_expires_with_its_suspension() -> None:
    links = links_for(
        project_id="p1",
        workspace_id="w1",
        execution_id="exec-1",
        generation=1,
        decisions=["approve", "reject"],
        channel="reviewers",
        expire_at=NOW + timedelta(hours=2),
        secret=SECRET,
        base_url="https://interlock.example.test/",
        now=NOW,
    )
    assert sorted(links) == ["approve", "reject"]
    token = links["approve"].removeprefix("https://interlock.example.test/act/")
    assert verify(token, SECRET, now=NOW + timedelta(hours=1)).decision == "approve"
    with pytest.raises(LinkExpired):
        verify(token, SECRET, now=NOW + timedelta(hours=2))


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", action_link_secret=SECRET
    )
    app = create_app(settings, store=world.store, publisher=KafkaPublisher(world.broker))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        yield client


async def refund_links(world: World) -> tuple[str, dict[str, str]]:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    links = links_for(
        project_id="p1",
        workspace_id="w1",
        execution_id=started.execution_id,
        generation=1,
        decisions=["approve", "reject"],
        channel="reviewers",
        expire_at=None,
        secret=SECRET,
        base_url="http://gateway",
    )
    return started.execution_id, {d: url.removeprefix("http://gateway") for d, url in links.items()}


async def test_following_a_link_asks_first_then_decides_once(
    world: World, http: httpx.AsyncClient
) -> None:
    execution_id, links = await refund_links(world)
    confirm = await http.get(links["approve"])
    assert confirm.status_code == 200
    assert "Confirm: approve" in confirm.text and "CLM-4821" in confirm.text
    assert "default-src 'self'" in confirm.headers["content-security-policy"]
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED  # GET only

    decided = await http.post(links["approve"])
    assert decided.status_code == 200 and "Recorded: approve" in decided.text
    done = await world.execution(execution_id)
    assert done.status is ExecutionStatus.COMPLETED and done.result["outcome"] == "refunded"
    assert done.decisions[0].reviewer == "link:reviewers"

    again = await http.post(links["approve"])
    assert again.status_code == 409 and "already been decided" in again.text
    other = await http.post(links["reject"])
    assert other.status_code == 409
    assert (await http.get(links["reject"])).status_code == 409
    assert len((await world.execution(execution_id)).decisions) == 1


async def test_expired_altered_and_disabled_links_decide_nothing(
    world: World, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    execution_id, links = await refund_links(world)
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
    plain = create_app(settings, store=world.store, publisher=KafkaPublisher(world.broker))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=plain), base_url="http://gateway"
    ) as client:
        assert (await client.post(links["approve"])).status_code == 404
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED
