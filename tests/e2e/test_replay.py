"""The replay guarantee end to end: side effects happen once across suspensions, crashes,
redelivery, zombies and agent upgrades. Four service processes (two sandbox replicas where it
matters), real Kafka, FerretDB, and a loopback effects service that records every call with its
idempotency key."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api
from tests.e2e.effects import Effects
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

AGENTS_FILE = Path(__file__).resolve().parents[2] / "agents" / "agents.toml"


@pytest.fixture(scope="module")
def effects() -> Iterator[Effects]:
    service = Effects()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture
async def replay_cluster(
    kafka_bootstrap: str,
    mongodb_uri: str,
    tmp_path: Path,
    effects: Effects,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Cluster]:
    """A fresh cluster per test, with two sandbox replicas; faults from the test's marker."""
    await effects.wait_ready()
    marker = request.node.get_closest_marker("faults")
    faults = marker.args[0] if marker else None
    cluster = Cluster(kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path)
    cluster.env["INTERLOCK_EFFECTS_URL"] = effects.url
    # Kafka notices a dead or frozen consumer after the session timeout: keep it short here.
    cluster.env["INTERLOCK_KAFKA_SESSION_TIMEOUT_MS"] = "6000"
    cluster.create_topics()
    sandbox_env = {}
    if faults:
        sandbox_env = {
            "INTERLOCK_FAULTS": faults,
            "INTERLOCK_FAULTS_ONCE_DIR": str(tmp_path / "faults"),
        }
    cluster.start("orchestrator", "notifier", "gateway")
    cluster.start("sandbox", env=sandbox_env)
    cluster.start("sandbox", env=sandbox_env)
    try:
        await cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def client(replay_cluster: Cluster) -> AsyncIterator[Api]:
    headers = {"Authorization": f"Bearer {await replay_cluster.key('proj-replay')}"}
    async with httpx.AsyncClient(
        base_url=replay_cluster.base_url, timeout=20, headers=headers
    ) as http:
        yield Api(http, project="proj-replay", workspace=f"ws-{uuid.uuid4().hex[:6]}")


def per_key(calls: list[dict[str, Any]], execution_id: str) -> dict[str, Counter[bool]]:
    keyed: dict[str, Counter[bool]] = {}
    for call in calls:
        if call["key"].startswith(execution_id):
            keyed.setdefault(call["key"], Counter())[call["applied"]] += 1
    return keyed


async def run_outreach(api: Api, stages: int, *, timeout: float = 90) -> str:
    """Invoke the outreach agent and approve every stage; return the execution id."""
    response = await api.invoke("outreach", f"{stages} stages")
    assert response.status_code == 202, response.text
    execution_id = str(response.json()["execution_id"])
    suspension = 0
    for _ in range(stages):
        body = await api.wait_for_suspension(execution_id, after=suspension, timeout=timeout)
        suspension = body["suspension_id"]
        assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 202
    done = await api.wait_for(execution_id, "completed", "error", timeout=timeout)
    assert done["status"] == "completed", done
    return execution_id


async def test_an_email_sent_before_the_interrupt_is_not_sent_again(
    client: Api, effects: Effects
) -> None:
    execution_id = await run_outreach(client, 1)
    keyed = per_key(await effects.calls(), execution_id)
    # Stage 1's email (before the interrupt) and the confirmation: two keys, each called once.
    assert len(keyed) == 2
    assert all(counts == Counter({True: 1}) for counts in keyed.values()), keyed


async def test_three_suspensions_each_effect_once(client: Api, effects: Effects) -> None:
    execution_id = await run_outreach(client, 3)
    keyed = per_key(await effects.calls(), execution_id)
    assert len(keyed) == 4  # three stage emails and the confirmation
    assert all(counts == Counter({True: 1}) for counts in keyed.values()), keyed
    audit = (await client.audit(execution_id)).json()["items"]
    assert [a["to_status"] for a in audit if a["action"] == "transition"].count("suspended") == 3


@pytest.mark.parametrize(
    "point",
    [
        pytest.param("step.after_effect", marks=pytest.mark.faults("step.after_effect=crash")),
        pytest.param("step.after_cache", marks=pytest.mark.faults("step.after_cache=crash")),
        pytest.param(
            "sandbox.before_report", marks=pytest.mark.faults("sandbox.before_report=crash")
        ),
    ],
)
@pytest.mark.timeout(240)  # the inner waits fail first, with the last status seen
async def test_sandbox_killed_at_each_point_another_replica_finishes(
    point: str, client: Api, effects: Effects, replay_cluster: Cluster
) -> None:
    execution_id = await run_outreach(client, 1, timeout=90)
    dead = [p for p in replay_cluster.processes["sandbox"] if p.poll() is not None]
    assert len(dead) == 1 and dead[0].returncode == -signal.SIGKILL, f"{point} did not fire"
    keyed = per_key(await effects.calls(), execution_id)
    assert len(keyed) == 2
    for key, counts in keyed.items():
        assert counts[True] == 1, (key, counts)  # applied once, whatever the attempts
    # Only a crash between the effect and its cache write sends it again, with the same key.
    resent = sorted(counts[False] for counts in keyed.values())
    assert resent == ([0, 1] if point == "step.after_effect" else [0, 0]), keyed


@pytest.mark.faults("step.after_effect=stall")
@pytest.mark.timeout(240)
async def test_a_zombie_replica_is_fenced(
    client: Api, effects: Effects, replay_cluster: Cluster
) -> None:
    response = await client.invoke("outreach", "1 stage")
    execution_id = str(response.json()["execution_id"])
    # One replica froze after sending the email; the other takes over and suspends.
    await client.wait_for(execution_id, "suspended", timeout=90)
    frozen = [i for i, p in enumerate(replay_cluster.processes["sandbox"]) if _is_stopped(p.pid)]
    assert len(frozen) == 1, "the stall fault did not fire"
    before = (await client.audit(execution_id)).json()["items"]
    replay_cluster.send_signal("sandbox", signal.SIGCONT, frozen[0])
    log = replay_cluster.workdir / f"sandbox-{frozen[0]}.log"
    await eventually(
        lambda: _read(log),
        lambda text: "dispatch.fenced" in text,
        timeout=30,
        what="the zombie to be fenced",
    )
    after = (await client.audit(execution_id)).json()["items"]
    assert after == before  # the zombie changed nothing: one lineage
    assert (await client.resume(execution_id, {"decision": "approve"})).status_code == 202
    done = await client.wait_for(execution_id, "completed", "error", timeout=60)
    assert done["status"] == "completed"
    keyed = per_key(await effects.calls(), execution_id)
    assert all(counts[True] == 1 for counts in keyed.values()), keyed


async def test_replaying_every_topic_from_the_start_changes_nothing(
    client: Api, effects: Effects, replay_cluster: Cluster
) -> None:
    execution_id = await run_outreach(client, 2)
    before_calls = await effects.calls()
    before_audit = (await client.audit(execution_id)).json()["items"]
    # New consumer groups read every topic from the earliest offset: every event is redelivered.
    replay_cluster.stop("orchestrator", "sandbox", "notifier")
    replay_cluster.env["INTERLOCK_CONSUMER_GROUP_PREFIX"] += "-replay"
    replay_cluster.start("orchestrator", "sandbox", "notifier")
    await wait_caught_up(replay_cluster)
    assert await effects.calls() == before_calls
    assert (await client.audit(execution_id)).json()["items"] == before_audit
    assert (await client.status_of(execution_id))["status"] == "completed"


@pytest.mark.timeout(360)  # twenty executions through a full restart: slow on a busy machine
async def test_all_services_killed_with_twenty_in_flight(
    client: Api, effects: Effects, replay_cluster: Cluster
) -> None:
    ids = []
    for _ in range(20):
        response = await client.invoke("outreach", "1 stage")
        ids.append(str(response.json()["execution_id"]))
    for execution_id in ids[:10]:
        await client.wait_for(execution_id, "suspended", timeout=90)
        await client.resume(execution_id, {"decision": "approve"})
    replay_cluster.stop(sig=signal.SIGKILL)
    replay_cluster.start("orchestrator", "notifier", "gateway")
    replay_cluster.start("sandbox")
    replay_cluster.start("sandbox")
    await replay_cluster.wait_ready()
    # The first ten were approved before the kill (their decisions may not be applied yet:
    # the claims hold them, so they go through without being submitted again).
    for execution_id in ids[10:]:
        await client.wait_for(execution_id, "suspended", timeout=120)
        assert (await client.resume(execution_id, {"decision": "approve"})).status_code == 202
    for execution_id in ids:
        done = await client.wait_for(execution_id, "completed", "error", timeout=120)
        assert done["status"] == "completed", done
        keyed = per_key(await effects.calls(), execution_id)
        assert len(keyed) == 2 and all(c[True] == 1 for c in keyed.values()), keyed


async def wait_caught_up(cluster: Cluster, timeout: float = 90) -> None:
    """Wait until every service's consumer group has committed the end of every topic: all
    events were redelivered and handled."""
    prefix = cluster.env["INTERLOCK_CONSUMER_GROUP_PREFIX"]
    bootstrap = cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    subscriptions = {
        "orchestrator": [
            "execution.requested",
            "decision.submitted",
            "execution.suspended",
            "execution.reported",
        ],
        "sandbox": ["execution.dispatched"],
        "notifier": ["execution.suspended"],
    }
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await admin.start()
    await consumer.start()
    await consumer.topics()  # fetches the metadata that partitions_for_topic reads
    try:

        async def lag() -> int:
            total = 0
            for service, topics in subscriptions.items():
                committed = await admin.list_consumer_group_offsets(f"{prefix}.{service}")
                partitions = [
                    TopicPartition(cluster.topic_prefix + topic, p)
                    for topic in topics
                    for p in consumer.partitions_for_topic(cluster.topic_prefix + topic) or set()
                ]
                ends = await consumer.end_offsets(partitions)
                for tp, end in ends.items():
                    done = committed.get(tp)
                    total += end - (done.offset if done else 0)
            return total

        await eventually(
            lag, lambda n: n == 0, timeout=timeout, what="the consumer groups to catch up"
        )
    finally:
        await consumer.stop()
        await admin.close()


def _is_stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("T")
    except OSError:
        return False


async def _read(path: Path) -> str:
    def read() -> str:
        return path.read_text(errors="replace") if path.exists() else ""

    return await asyncio.to_thread(read)


async def test_resume_after_the_agent_code_changed_is_refused_until_reverted(
    client: Api, replay_cluster: Cluster, tmp_path: Path
) -> None:
    agents_file = tmp_path / "agents.toml"
    original = await _read(AGENTS_FILE)

    async def deploy_sandboxes(version: str) -> None:
        agents_file.write_text(
            original.replace(
                'factory = "agents.outreach:build_graph"',
                f'factory = "agents.outreach:build_graph"\nversion = "{version}"',
            )
        )
        replay_cluster.stop("sandbox")
        replay_cluster.env["INTERLOCK_AGENTS_FILE"] = str(agents_file)
        log = replay_cluster.workdir / "sandbox-0.log"
        seen = len(await _read(log))  # the log is appended to: look only at what comes next
        replay_cluster.start("sandbox")
        await eventually(
            lambda: _read(log),
            lambda text: f'"fingerprint": "{version}"' in text[seen:],
            timeout=60,
            what=f"a sandbox running outreach {version}",
        )

    await deploy_sandboxes("v1")
    response = await client.invoke("outreach", "1 stage")
    execution_id = str(response.json()["execution_id"])
    await client.wait_for(execution_id, "suspended", timeout=60)

    await deploy_sandboxes("v2")
    refused = await client.resume(execution_id, {"decision": "approve"})
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert problem["type"].endswith("/agent-version-changed")
    assert "v1" in problem["detail"] and "v2" in problem["detail"]
    assert (problem["suspended_with"], problem["current"]) == ("v1", "v2")
    assert (await client.status_of(execution_id))["status"] == "suspended"

    await deploy_sandboxes("v1")
    assert (await client.resume(execution_id, {"decision": "approve"})).status_code == 202
    done = await client.wait_for(execution_id, "completed", "error", timeout=60)
    assert done["status"] == "completed"
