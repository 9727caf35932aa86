"""Each process serves only the metrics of the services it runs (``shared.metrics.registry_of``),
so no process serves a series it never moves: an unlabelled gauge would read a constant 0 there
(the gateway once served ``interlock_pending_reviews 0``)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase

from shared import metrics
from shared.health import health_app

ROOT = Path(__file__).resolve().parents[2]


def served(*services: str) -> str:
    return generate_latest(metrics.registry_of(*services)).decode()


def declared() -> dict[str, MetricWrapperBase]:
    return {n: v for n, v in vars(metrics).items() if isinstance(v, MetricWrapperBase)}


def test_every_metric_says_which_services_measure_it() -> None:
    assert set(declared().values()) == set(metrics.MEASURED_BY)


def test_the_gateway_serves_its_own_metrics_and_not_the_orchestrators() -> None:
    gateway = served("gateway")
    assert "interlock_http_requests_total" in gateway
    assert "interlock_store_command_seconds" in gateway
    for elsewhere in (
        "interlock_pending_reviews",
        "interlock_review_wait_seconds",
        "interlock_decision_to_resume_seconds",
        "interlock_handled_events_total",
    ):
        assert elsewhere not in gateway
    assert "process_cpu_seconds_total" in gateway  # the process's own metrics stay


def test_each_service_serves_what_it_measures() -> None:
    orchestrator, sandbox, notifier = served("orchestrator"), served("sandbox"), served("notifier")
    assert "interlock_pending_reviews" in orchestrator
    assert "interlock_pending_reviews" not in sandbox + notifier
    assert "interlock_decision_to_resume_seconds" in sandbox
    assert "interlock_decision_to_resume_seconds" not in orchestrator + notifier
    assert "interlock_http_requests_total" not in orchestrator + sandbox + notifier
    for consumer in (orchestrator, sandbox, notifier):
        assert "interlock_handled_events_total" in consumer


def test_a_process_running_every_service_serves_every_metric() -> None:
    every = served(*metrics.SERVICES)
    for metric in declared().values():
        assert f"# HELP {metric._name}" in every


def test_unknown_services_are_refused() -> None:
    with pytest.raises(ValueError):
        metrics.registry_of("gatewy")
    with pytest.raises(ValueError):
        metrics.registry_of()


def test_a_metric_moved_in_a_service_is_declared_for_it() -> None:
    """A metric a service's code moves (``metrics.NAME`` or an imported ``NAME``) is one that
    service's process serves."""
    for service in metrics.SERVICES:
        code = "\n".join(p.read_text() for p in (ROOT / "services" / service).rglob("*.py"))
        for name, metric in declared().items():
            if re.search(rf"\b{name}\b", code):
                assert service in metrics.MEASURED_BY[metric], (service, name)


async def test_the_health_app_serves_the_registry_it_is_given() -> None:
    app = health_app({}, metrics.registry_of("gateway"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://health"
    ) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert "interlock_http_requests_total" in response.text
    assert "interlock_pending_reviews" not in response.text
