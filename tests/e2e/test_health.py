"""Every service answers its probes: the gateway on its API port, each consumer process on its
own health port, ready only with Kafka and the database reachable (real ones here)."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.cluster import Cluster

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
