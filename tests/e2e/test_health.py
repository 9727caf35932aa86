"""Every service answers its probes: the gateway on its API port, each consumer process on its
own health port, ready only with Kafka and the database reachable (real ones here)."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, Api
from tests.eventually import eventually

pytestmark = pytest.mark.e2e


async def test_every_process_is_alive_and_ready(cluster: Cluster) -> None:
    consumers = {key: port for key, port in cluster.health_ports.items() if key[0] != "gateway"}
    assert {service for service, _ in consumers} == {"orchestrator", "sandbox", "notifier"}
    async with httpx.AsyncClient(timeout=10) as client:
        for (service, index), port in consumers.items():
            alive = await client.get(f"http://127.0.0.1:{port}/healthz")
            assert alive.status_code == 200, (service, index)
            ready = await client.get(f"http://127.0.0.1:{port}/readyz")
            assert ready.json() == {"status": "ready"}, (service, index, ready.text)
            metrics = await client.get(f"http://127.0.0.1:{port}/metrics")
            assert metrics.status_code == 200, (service, index)
            assert "interlock_handled_events_total" in metrics.text, (service, index)
        assert (await client.get(f"{cluster.base_url}/healthz")).status_code == 200
        assert (await client.get(f"{cluster.base_url}/readyz")).json() == {"status": "ready"}


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one series in a Prometheus text exposition (None when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


async def test_the_measured_series_move_when_an_execution_runs(cluster: Cluster) -> None:
    """Pending reviews and executions by status (counted by the orchestrator in the store),
    consumer lag per partition (measured at the broker), and the decision-to-resume latency
    (observed by the sandbox) are served by the processes that own them and follow one
    execution through its review."""
    orchestrator = f"http://127.0.0.1:{cluster.health_ports[('orchestrator', 0)]}/metrics"
    sandbox = f"http://127.0.0.1:{cluster.health_ports[('sandbox', 0)]}/metrics"
    group = f"{cluster.env['INTERLOCK_CONSUMER_GROUP_PREFIX']}.orchestrator"
    key = await cluster.key(PROJECT)
    async with (
        httpx.AsyncClient(timeout=10) as scrape,
        httpx.AsyncClient(
            base_url=cluster.base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}
        ) as client,
    ):
        api = Api(client)

        async def scraped(url: str) -> str:
            return (await scrape.get(url)).text

        resumes = "interlock_decision_to_resume_seconds_count"
        resumes_before = sample(await scraped(sandbox), resumes)
        suspended = await api.start_suspended()
        await eventually(
            lambda: scraped(orchestrator),
            lambda text: (
                (sample(text, "interlock_pending_reviews") or 0) >= 1
                and (sample(text, "interlock_executions", status="suspended") or 0) >= 1
                and sample(
                    text,
                    "interlock_consumer_lag",
                    group=group,
                    topic="execution.requested",
                    partition="0",
                )
                == 0
            ),
            timeout=30,
            what="the orchestrator's gauges to show the pending review and a drained partition",
        )
        decided = await api.resume(suspended["execution_id"], {"decision": "approve"})
        assert decided.status_code in (200, 202), decided.text
        await api.wait_for(suspended["execution_id"], "completed")
        text = await scraped(sandbox)
        assert (sample(text, resumes) or 0) == (resumes_before or 0) + 1
        await eventually(
            lambda: scraped(orchestrator),
            lambda text: (
                (sample(text, "interlock_transitions_total", to_status="completed") or 0) >= 1
                and sample(text, "interlock_executions", status="completed") is None
            ),
            timeout=30,
            what="the completed execution to be counted as it ended, not by the gauge",
        )
