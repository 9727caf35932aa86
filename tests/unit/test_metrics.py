"""The Prometheus metrics move where they should, and both exposition endpoints serve them.

The default registry is process-wide, so every assertion compares a value before and after."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client import REGISTRY

from interlock.sdk import run_step
from interlock.sdk.runtime import StepRun, step_run
from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.notifier.app import Notifier, NotifierSettings
from services.notifier.delivery import Dispatcher
from services.orchestrator.gauges import ExecutionGauges
from shared.events import ExecutionSuspended, PendingInterrupt
from shared.health import health_app
from shared.notifications.config import WebhookConfig
from shared.notifications.model import DeliveryFailed, Notification
from shared.store.memory import InMemoryStepStore, InMemoryStore
from tests.ports import free_port
from tests.unit.inprocess import World

ORCHESTRATOR_DECISIONS = "orchestrator:mem.decision.submitted"


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def deltas(*series: tuple[str, dict[str, str]]) -> Callable[[], list[float]]:
    """Read ``series`` now; the returned function gives how much each moved since."""
    before = [sample(name, **labels) for name, labels in series]

    def moved() -> list[float]:
        return [
            sample(name, **labels) - b for (name, labels), b in zip(series, before, strict=True)
        ]

    return moved


async def test_a_reviewed_execution_moves_transitions_handled_events_and_review_wait(
    world: World,
) -> None:
    moved = deltas(
        ("interlock_transitions_total", {"from_status": "running", "to_status": "suspended"}),
        ("interlock_transitions_total", {"from_status": "suspended", "to_status": "resuming"}),
        ("interlock_transitions_total", {"from_status": "running", "to_status": "completed"}),
        (
            "interlock_handled_events_total",
            {"consumer": ORCHESTRATOR_DECISIONS, "topic": "decision.submitted", "outcome": "ok"},
        ),
        ("interlock_handler_seconds_count", {"consumer": ORCHESTRATOR_DECISIONS}),
        ("interlock_review_wait_seconds_count", {}),
    )
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    assert moved()[0] == 1 and moved()[1] == 0 and moved()[5] == 0
    await world.decide(started.execution_id, "Approve", "ok")
    assert moved() == [1, 1, 1, 1, 1, 1]


async def test_a_rejected_message_counts_as_a_dead_letter(world: World) -> None:
    consumer = ORCHESTRATOR_DECISIONS
    moved = deltas(
        ("interlock_dead_letters_total", {"consumer": consumer}),
        (
            "interlock_handled_events_total",
            {"consumer": consumer, "topic": "decision.submitted", "outcome": "dead_letter"},
        ),
    )
    await world.bus.publish_raw(b"not json", world.topics.decisions, key="x")
    assert moved() == [1, 1]


async def test_a_durable_step_counts_one_miss_then_one_hit() -> None:
    store = InMemoryStepStore()
    moved = deltas(
        ("interlock_step_cache_total", {"result": "miss"}),
        ("interlock_step_cache_total", {"result": "hit"}),
    )

    async def charge(amount: int) -> str:
        return f"ch-{amount}"

    for attempt in (1, 2):  # the second attempt is served from the cache
        run = await StepRun.open(execution_id="exec-m", epoch=1, attempt=attempt, store=store)
        with step_run(run):
            assert await run_step("charge", charge, 10, key="order-1") == "ch-10"
    assert moved() == [1, 1]


class FlakyChannel:
    def __init__(self, failures: int) -> None:
        self.failures = failures

    async def send(self, notification: Notification) -> None:
        if self.failures:
            self.failures -= 1
            raise DeliveryFailed("HTTP 503")


async def test_notification_attempts_count_by_channel_and_outcome() -> None:
    store = InMemoryStore().notifications
    clock = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    settings = NotifierSettings(kafka_bootstrap_servers="unused:9092")
    config = WebhookConfig(type="webhook", url="x", secrets_env="X")
    notifier = Notifier(settings, store, {}, {"metrics-ops": config}, clock=lambda: clock)
    await notifier.on_suspended(
        ExecutionSuspended(
            execution_id="exec-metrics",
            project_id="demo",
            workspace_id="default",
            agent="refund-approval",
            epoch=1,
            suspension_id=1,
            suspend_context={},
            allowed_decisions=["approve", "reject"],
            interrupts=[PendingInterrupt(interrupt_id="i-1", value={})],
        )
    )
    loop = Dispatcher(
        store,
        {"metrics-ops": FlakyChannel(failures=1)},
        clock=lambda: clock,
        owner="r1",
        max_attempts=3,
        rng=random.Random(7),
    )
    moved = deltas(
        ("interlock_notification_deliveries_total", {"channel": "metrics-ops", "outcome": "retry"}),
        (
            "interlock_notification_deliveries_total",
            {"channel": "metrics-ops", "outcome": "delivered"},
        ),
    )
    assert await loop.run_once() == 1
    clock = clock.replace(hour=13)
    assert await loop.run_once() == 1
    assert moved() == [1, 1]


async def test_the_gateway_serves_metrics_on_its_health_listener_not_on_the_api_port(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts cover every tenant: no key-less /metrics on the public port (issue 17); the
    separate listener (INTERLOCK_HEALTH_PORT, cluster network only) serves it, unlimited."""
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    port = free_port()
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092",
        topic_prefix="mem.",
        rate_limit_per_second=0.001,
        rate_limit_burst=1,
        health_port=port,
    )
    app = create_app(settings, store=world.store, publisher=world.bus)
    assert "/metrics" not in app.openapi()["paths"]
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://gateway") as client,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as scrape,
    ):
        public = await client.get("/metrics")
        assert public.status_code == 404
        assert public.headers["content-type"] == "application/problem+json"
        for _ in range(3):  # past the burst of one: scrapes are never limited
            response = await scrape.get("/metrics")
            assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        assert "interlock_http_requests_total" in response.text
        # Only the orchestrator counts pending reviews: not served here as a constant 0.
        assert "interlock_pending_reviews" not in response.text
        assert (await scrape.get("/readyz")).json() == {"status": "ready"}


async def test_the_health_app_serves_metrics() -> None:
    transport = httpx.ASGITransport(app=health_app({}))
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "interlock_handled_events_total" in response.text


async def test_the_gauges_count_executions_by_status_from_the_store(world: World) -> None:
    gauges = ExecutionGauges(world.store.executions)
    first = await world.invoke("refund-approval", "Refund claim CLM-4821")
    await world.invoke("refund-approval", "Refund claim CLM-4821")
    await gauges.refresh()
    assert sample("interlock_pending_reviews") == 2
    assert sample("interlock_executions", status="suspended") == 2
    assert sample("interlock_executions", status="running") == 0
    await world.decide(first.execution_id, "approve")
    await gauges.refresh()
    assert sample("interlock_pending_reviews") == 1
    assert sample("interlock_executions", status="suspended") == 1
    # Ended executions are the history's: counted as they end, never by the gauge's query.
    assert REGISTRY.get_sample_value("interlock_executions", {"status": "completed"}) is None


async def test_a_resume_observes_the_time_from_decision_to_running_graph(world: World) -> None:
    moved = deltas(("interlock_decision_to_resume_seconds_count", {}))
    started = await world.invoke("chain-approval", "2")
    assert moved() == [0], "a first run answers no decision"
    await world.decide(started.execution_id, "approve")
    assert moved() == [1]
    await world.decide(started.execution_id, "approve")
    assert moved() == [2]
    assert (await world.execution(started.execution_id)).status.value == "completed"


async def test_gateway_requests_count_by_route_template_and_status(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(
        kafka_bootstrap_servers="unused:9092",
        topic_prefix="mem.",
        rate_limit_per_second=0.001,
        rate_limit_burst=1,
    )
    app = create_app(settings, store=world.store, publisher=world.bus)
    route = "/api/v1/projects/{project_id}/executions/{execution_id}"
    moved = deltas(
        ("interlock_http_requests_total", {"method": "GET", "route": route, "status": "401"}),
        ("interlock_http_requests_total", {"method": "GET", "route": "unmatched", "status": "429"}),
        ("interlock_http_request_seconds_count", {"method": "GET", "route": route}),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        first = await client.get("/api/v1/projects/p1/executions/e-1", params={"workspace_id": "w"})
        assert first.status_code == 401  # no key; the path's id is not a label
        second = await client.get("/api/v1/projects/p1/executions/e-2")
        assert second.status_code == 429  # over the burst of one: turned away before routing
    assert moved() == [1, 1, 1]
