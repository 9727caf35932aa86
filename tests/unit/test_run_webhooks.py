"""Issue 36, item 3, over the in-process services: a LangGraph run's ``webhook`` is stored with
its execution, the orchestrator tells the notifier once the run ends (at its interrupt, or with
the execution) and the notifier keeps one delivery per run, however often it is told; a URL the
private-network guard refuses is a 422 before anything starts; the channel sends LangGraph's
body, signed as Standard Webhooks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.notifier.channels.run_webhook import RunWebhookChannel
from services.notifier.channels.webhook import parse_secret, sign
from shared.domain.execution import ExecutionStatus, RunWebhook
from shared.domain.runs import run_id, webhook_payload, webhooks_due
from shared.notifications.model import DeliveryFailed, Notification
from shared.store.api_keys import Role, create_key
from tests.direct_bus import Collector
from tests.factories import pending
from tests.unit.inprocess import World

W1 = "/langgraph/projects/p1/workspaces/w1"
REFUND = "refund-approval"
INPUT = {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}
HOOK = "http://127.0.0.1:9/run-ended"
SECRET = "whsec_aW50ZXJsb2NrLWRvY3MtZXhhbXBsZS1zZWNyZXQtMDE="


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092",
        topic_prefix="mem.",
        webhook_allow_private_networks=True,
    )
    app = create_app(settings, store=world.store, publisher=world.bus)
    _, owner = await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="o", email="o@example.com"
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {owner}"},
    ) as client:
        yield client


def observe(world: World) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    world.bus.add_consumer(
        world.topics.run_webhooks, "test-webhook-observer", Collector("observer", seen)
    )
    return seen


async def test_each_run_is_told_once_at_its_interrupt_and_at_the_end(
    world: World, http: httpx.AsyncClient
) -> None:
    seen = observe(world)
    await http.post(f"{W1}/threads", json={"thread_id": "t1"})
    first = await http.post(
        f"{W1}/threads/t1/runs", json={"assistant_id": REFUND, "input": INPUT, "webhook": HOOK}
    )
    assert first.status_code == 200, first.text
    (suspended,) = await world.store.notifications.due(datetime.now(UTC))
    assert suspended.channel == "run-webhook"
    told = suspended.notification
    assert told.type == "run.webhook" and told.webhook_url == HOOK
    run = told.run or {}
    assert run["run_id"] == first.json()["run_id"]
    assert run["thread_id"] == "t1" and run["assistant_id"] == REFUND
    assert run["status"] == "success" and run["execution_status"] == "suspended"
    assert run["interrupts"] and "values" in run and "error" not in run

    second = await http.post(
        f"{W1}/threads/t1/runs",
        json={"assistant_id": REFUND, "command": {"resume": "approve"}, "webhook": HOOK},
    )
    assert second.status_code == 200, second.text
    deliveries = await world.store.notifications.due(datetime.now(UTC))
    by_run = {(d.notification.run or {})["run_id"]: d.notification for d in deliveries}
    assert set(by_run) == {first.json()["run_id"], second.json()["run_id"]}
    ended = by_run[second.json()["run_id"]].run or {}
    assert ended["execution_status"] == "completed" and ended["interrupts"] == []
    # Told again with later outcomes (the run before the latest too), stored once each.
    assert len(seen) > 2
    assert {m["event_id"] for m in seen} == {
        f"{told.execution_id}:webhook:1",
        f"{told.execution_id}:webhook:2",
    }


async def test_a_run_without_a_webhook_publishes_nothing_for_one(
    world: World, http: httpx.AsyncClient
) -> None:
    seen = observe(world)
    await http.post(f"{W1}/threads", json={"thread_id": "t2"})
    await http.post(f"{W1}/threads/t2/runs", json={"assistant_id": REFUND, "input": INPUT})
    await http.post(
        f"{W1}/threads/t2/runs", json={"assistant_id": REFUND, "command": {"resume": "approve"}}
    )
    assert seen == []
    assert await world.store.notifications.due(datetime.now(UTC)) == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/hook", "http:// or https://"),
        ("http:///hook", "names a host"),
        ("http://127.0.0.1:8000/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/hook", "private"),
        ("http://[::ffff:192.168.1.1]/hook", "private"),
        ("http://100.64.0.1/hook", "private"),
        ("http://0.0.0.0/hook", "reserved"),
    ],
)
async def test_a_webhook_the_guard_refuses_is_a_422_and_starts_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch, url: str, why: str
) -> None:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    app = create_app(
        GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem."),
        store=world.store,
        publisher=world.bus,
    )
    _, owner = await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="o", email="o@example.com"
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {owner}"},
    ) as client:
        await client.post(f"{W1}/threads", json={"thread_id": "t3"})
        refused = await client.post(
            f"{W1}/threads/t3/runs", json={"assistant_id": REFUND, "input": INPUT, "webhook": url}
        )
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["type"].endswith("/webhook-refused")
        assert why in refused.json()["detail"]
        state = await client.get(f"{W1}/threads/t3")
        assert state.json()["status"] == "idle"


def test_webhooks_fall_due_as_their_runs_end() -> None:
    hooks = [RunWebhook(epoch=1, url="https://a.example/1"), RunWebhook(epoch=2, url="https://a")]
    base = pending().model_copy(update={"webhooks": hooks})
    S = ExecutionStatus
    assert webhooks_due(base) == []
    running = base.model_copy(update={"status": S.RUNNING, "epoch": 1})
    assert webhooks_due(running) == []
    suspended = running.model_copy(update={"status": S.SUSPENDED})
    assert webhooks_due(suspended) == [hooks[0]]
    resumed = suspended.model_copy(update={"status": S.RUNNING, "epoch": 2})
    assert webhooks_due(resumed) == [hooks[0]]  # the run before the latest: told again
    done = resumed.model_copy(update={"status": S.COMPLETED})
    assert webhooks_due(done) == hooks
    # A cancel moves the epoch on and starts no run: the decision's run never began.
    cancelled = suspended.model_copy(update={"status": S.CANCELLED, "epoch": 2})
    assert webhooks_due(cancelled) == [hooks[0]]
    # Older runs' webhooks were told when theirs ended; later outcomes do not repeat them.
    later = done.model_copy(update={"epoch": 4, "status": S.SUSPENDED})
    assert webhooks_due(later) == []


def test_a_failed_runs_payload_carries_its_error_and_a_huge_state_is_left_out() -> None:
    hook = RunWebhook(epoch=1, url="https://a.example/1")
    failed = pending().model_copy(
        update={
            "status": ExecutionStatus.ERROR,
            "epoch": 1,
            "error": {"error_type": "ValueError", "message": "no"},
        }
    )
    payload = webhook_payload(failed, hook)
    assert payload["status"] == "error"
    assert payload["error"] == {"error": "ValueError", "message": "no"}
    assert payload["run_id"] == run_id(failed.execution_id, 1)
    huge = failed.model_copy(
        update={"status": ExecutionStatus.COMPLETED, "result": {"blob": "x" * 300_000}}
    )
    big = webhook_payload(huge, hook)
    assert big["values"] is None and big["values_omitted"] is True and "error" not in big


def run_notification(url: str) -> Notification:
    return Notification(
        notification_id="e1:webhook:1",
        type="run.webhook",
        project_id="p1",
        workspace_id="w1",
        execution_id="e1",
        agent=REFUND,
        suspension_id=1,
        review_url="https://interlock.example/reviews",
        webhook_url=url,
        run={"run_id": "r1", "status": "success", "values": {"a": 1}},
    )


async def test_the_channel_sends_langgraphs_body_signed() -> None:
    received: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(204)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        channel = RunWebhookChannel([SECRET], allow_private=False, client=client, clock=lambda: 1e9)
        await channel.send(run_notification("https://93.184.216.34/hook"))
    (request,) = received
    body = json.loads(request.content)
    assert body == {
        "run_id": "r1",
        "status": "success",
        "values": {"a": 1},
        "webhook_sent_at": "2001-09-09T01:46:40+00:00",
    }
    assert request.headers["webhook-id"] == "e1:webhook:1"
    assert request.headers["webhook-timestamp"] == "1000000000"
    expected = sign(parse_secret(SECRET), "e1:webhook:1", 1_000_000_000, request.content)
    assert request.headers["webhook-signature"] == expected


async def test_the_channel_checks_the_url_again_before_each_attempt() -> None:
    channel = RunWebhookChannel([], allow_private=False)
    with pytest.raises(DeliveryFailed) as refused:
        await channel.send(run_notification("http://127.0.0.1:9/hook"))
    assert not refused.value.retryable and "loopback" in refused.value.reason
    with pytest.raises(DeliveryFailed) as unresolved:
        await channel.send(run_notification("https://no-such-host.invalid/hook"))
    assert unresolved.value.retryable
