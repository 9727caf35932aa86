"""Deadlines end to end: two orchestrator replicas (separate processes) on real Kafka and
FerretDB, their clock a file the test moves forward, the notifier delivering to a webhook
receiver on loopback. Remind, escalate and expire fire once each, also when they all passed
while every orchestrator was down."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.e2e.clocked import clocked_cluster, set_clock
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.e2e.test_notifications import NEW_SECRET, OLD_SECRET, Receiver, receiver
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

__all__ = ["receiver"]  # the fixture, shared with test_notifications

PROJECT = "proj-deadlines"
T0 = datetime.now(UTC).replace(microsecond=0)
HOUR = timedelta(hours=1)


@pytest.fixture
async def deadline_cluster(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path, receiver: Receiver
) -> AsyncIterator[Cluster]:
    channels = tmp_path / "notifications.toml"
    channels.write_text(
        f"""
[channels.ops]
type = "webhook"
url = "http://127.0.0.1:{receiver.port}/ok"
secrets_env = "TEST_OPS_SECRETS"
"""
    )
    env = {
        "INTERLOCK_NOTIFICATIONS_FILE": str(channels),
        "TEST_OPS_SECRETS": f"{NEW_SECRET},{OLD_SECRET}",
        "INTERLOCK_NOTIFICATION_POLL_SECONDS": "0.2",
        "INTERLOCK_DEADLINE_POLL_SECONDS": "0.3",
    }
    async with clocked_cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path, now=T0, env=env
    ) as cluster:
        yield cluster


def kinds(receiver: Receiver) -> list[str]:
    return [json.loads(call.body)["type"] for call in receiver.calls["ok"]]


async def test_remind_escalate_expire_once_each_across_replicas_and_downtime(
    deadline_cluster: Cluster, receiver: Receiver
) -> None:
    headers = {"Authorization": f"Bearer {await deadline_cluster.key(PROJECT)}"}
    async with httpx.AsyncClient(
        base_url=deadline_cluster.base_url, timeout=20, headers=headers
    ) as client:
        api = Api(client, project=PROJECT, workspace="ws-deadlines")
        execution_id = (await api.start_suspended())["execution_id"]

        async def seen() -> list[str]:
            return kinds(receiver)

        await eventually(seen, lambda k: k == ["review.requested"], what="the review request")
        set_clock(deadline_cluster, T0 + 5 * HOUR)  # past remind (4 h)
        await eventually(seen, lambda k: "review.reminder" in k, timeout=30, what="the reminder")
        # Every orchestrator down while escalate (24 h) and expiry (48 h) pass.
        deadline_cluster.stop("orchestrator")
        set_clock(deadline_cluster, T0 + 50 * HOUR)
        deadline_cluster.start("orchestrator")
        deadline_cluster.start("orchestrator")
        await deadline_cluster.wait_ready()
        expired = await api.wait_for(execution_id, "expired", timeout=60)
        assert expired["status"] == "expired"
        await eventually(seen, lambda k: "review.escalated" in k, timeout=30, what="the escalation")

        audit = (await api.audit(execution_id)).json()["items"]
        actions = [(a["actor"], a["action"]) for a in audit]
        assert actions.count(("system:deadlines", "deadline.remind")) == 1
        assert actions.count(("system:deadlines", "deadline.escalate")) == 1
        assert audit[-1]["to_status"] == "expired" and audit[-1]["actor"] == "system:deadlines"
        assert sorted(kinds(receiver)) == sorted(
            ["review.requested", "review.reminder", "review.escalated"]
        )
        ids = [call.headers["webhook-id"] for call in receiver.calls["ok"]]
        assert sorted(ids) == sorted(
            [
                f"{execution_id}:1:ops",
                f"{execution_id}:1:remind:ops",
                f"{execution_id}:1:escalate:ops",
            ]
        )
        refused = await api.resume(execution_id, {"decision": "approve"})
        assert refused.status_code == 409, refused.text
