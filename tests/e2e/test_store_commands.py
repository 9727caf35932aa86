"""Store commands per execution (issue 18, item 5): one full execution of ``bench-pipeline``
(3 durable steps, an interrupt, approve, 2 steps) over the four services as separate processes
on real Kafka and FerretDB, and every database command each process made for it, the sandbox's
LangGraph checkpointer included, against the budget.

Every process times each command into ``interlock_store_command_seconds{command,collection}``
(shared/store/watch.py) and serves it on its health listener's ``/metrics``; the test reads the
histograms' counts before and after the execution (bench/commands.py). A count is
deterministic, so it is asserted exactly; timings belong to the benchmark.

Nothing periodic may run in the window:

- the orchestrator's deadline and undelivered-request sweeps (``INTERLOCK_DEADLINE_POLL_SECONDS``)
  its cron sweep (``INTERLOCK_CRON_POLL_SECONDS``) and its executions-by-status gauge
  (``INTERLOCK_METRICS_POLL_SECONDS``, which also paces every process's consumer-lag gauge:
  Kafka only) run once at start-up and then hourly;
- the notifier's delivery poll (``INTERLOCK_NOTIFICATION_POLL_SECONDS``) cannot wait longer than
  a minute, so the window is opened right after one of its polls and must close within the
  minute;
- each process's counts are settled (unchanged for ``QUIET_SECONDS``) before each snapshot.

The test reads statuses from the public ``execution.status`` topic, never through the API (each
GET would cost the gateway store reads), so the window holds only the execution's own two HTTP
calls: invoke and resume.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.commands import Breakdown, Counts, diff, scrape, settle
from tests.e2e.cluster import Cluster

pytestmark = pytest.mark.e2e

STORE_COMMANDS_PER_EXECUTION = 40
"""Issue 18's budget: all four services and the checkpointer together, per full execution."""

AGENT = "bench-pipeline"
PROJECT = "proj-commands"
WORKSPACE = "ws-commands"
HOUR = "3600"
NOTIFIER_POLL_SECONDS = 60.0
"""The longest the notifier's delivery poll may wait (``NotifierSettings``)."""
SWEEPS_OUT_OF_THE_WINDOW = {
    "INTERLOCK_DEADLINE_POLL_SECONDS": HOUR,
    "INTERLOCK_METRICS_POLL_SECONDS": HOUR,
    "INTERLOCK_CRON_POLL_SECONDS": HOUR,
    "INTERLOCK_NOTIFICATION_POLL_SECONDS": str(int(NOTIFIER_POLL_SECONDS)),
}
QUIET_SECONDS = 2.0
"""Counts unchanged this long: every process is done with the execution."""
WINDOW_MARGIN_SECONDS = 10.0
"""The window must close this long before the notifier's next poll can come."""


@dataclass
class Counting:
    """A cluster of its own and where each of its processes serves /metrics. (Not a ``Cluster``
    itself: the budget's failure message is the breakdown, not the services' logs.)"""

    cluster: Cluster
    ports: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
async def counting(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Counting]:
    cluster = Cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path_factory.mktemp("commands")
    )
    cluster.env.update(SWEEPS_OUT_OF_THE_WINDOW)
    cluster.create_topics()
    cluster.start()
    try:
        await cluster.wait_ready()
        ports = {f"{s}-{i}": port for (s, i), port in cluster.health_ports.items()}
        yield Counting(cluster, ports)
    finally:
        cluster.stop()


class StatusFeed:
    """``execution.status`` read as an outside system may: partitions assigned (no group),
    from their end when opened. Costs the services nothing."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        self._assigned = [TopicPartition(topic, p) for p in range(partitions)]
        self._seen: dict[str, list[str]] = {}

    async def __aenter__(self) -> StatusFeed:
        await self._consumer.start()
        self._consumer.assign(self._assigned)
        await self._consumer.seek_to_end(*self._assigned)
        for tp in self._assigned:  # resolve the end offsets before anything is invoked
            await self._consumer.position(tp)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._consumer.stop()

    async def wait(self, execution_id: str, status: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while status not in self._seen.get(execution_id, []):
            seen = self._seen.get(execution_id, [])
            if {"error", "cancelled", "expired"} & set(seen):
                raise AssertionError(f"{execution_id} went {seen}, waiting for {status}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{execution_id}: {status} not seen in {timeout:g} s ({seen})")
            batches = await self._consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for record in records:
                    event = json.loads(record.value or b"{}")
                    self._seen.setdefault(event["execution_id"], []).append(event["status"])


async def run_one(
    http: httpx.AsyncClient,
    feed: StatusFeed,
    before_deciding: Callable[[], Awaitable[object]] | None = None,
) -> str:
    """One full execution through the HTTP API: invoke, suspended, approve, completed.

    ``before_deciding``: what to wait for between the suspension and the decision. The
    orchestrator announces a suspension while it writes the execution's head (issue 35: no
    round trip waits on the other), so a decision sent the instant the announcement arrives can
    read the head before it is written and repair it from the log (4 commands more: the
    versions read, the head rewritten). A reviewer answers seconds later, not within that
    millisecond; the window waits for the processes to settle first, so it counts that path."""
    invoked = await http.post(
        f"/api/v1/projects/{PROJECT}/workspaces/{WORKSPACE}/invoke",
        json={"agent": AGENT, "message": "count the store commands"},
    )
    assert invoked.status_code == 202, invoked.text
    execution_id = str(invoked.json()["execution_id"])
    await feed.wait(execution_id, "suspended")
    if before_deciding is not None:
        await before_deciding()
    resumed = await http.post(
        f"/api/v1/projects/{PROJECT}/executions/{execution_id}/resume",
        params={"workspace_id": WORKSPACE},
        json={"decision": "approve"},
    )
    assert resumed.status_code == 202, resumed.text
    await feed.wait(execution_id, "completed")
    return execution_id


async def after_the_notifiers_next_poll(
    metrics: httpx.AsyncClient, ports: dict[str, int], timeout: float
) -> float:
    """Wait for the notifier's next delivery poll (its counts move) and return when it was seen:
    its next one is then at least ``NOTIFIER_POLL_SECONDS`` away."""
    notifier = {p: port for p, port in ports.items() if p.startswith("notifier-")}
    before = await scrape(metrics, notifier)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if await scrape(metrics, notifier) != before:
            return time.monotonic()
    raise TimeoutError(f"the notifier did not poll in {timeout:g} s")


@pytest.mark.timeout(300)
async def test_one_execution_stays_within_the_store_command_budget(counting: Counting) -> None:
    cluster, ports = counting.cluster, counting.ports
    key = await cluster.key(PROJECT)
    topic = f"{cluster.topic_prefix}execution.status"
    partitions = int(cluster.env["INTERLOCK_TOPIC_PARTITIONS"])
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=cluster.base_url, headers=headers, timeout=30) as http,
        httpx.AsyncClient(timeout=10) as metrics,
        StatusFeed(cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"], topic, partitions) as feed,
    ):
        try:
            # First-time costs (indexes, agent versions, the key's first use...) are paid here.
            await run_one(http, feed)
            await settle(metrics, ports, quiet=QUIET_SECONDS, timeout=60)
            polled = await after_the_notifiers_next_poll(
                metrics, ports, timeout=NOTIFIER_POLL_SECONDS + 30
            )
            before = await settle(metrics, ports, quiet=QUIET_SECONDS, timeout=30)
            began = time.monotonic()
            execution_id = await run_one(
                http, feed, lambda: settle(metrics, ports, quiet=QUIET_SECONDS, timeout=30)
            )
            took = time.monotonic() - began
            after = await settle(metrics, ports, quiet=QUIET_SECONDS, timeout=60)
            closed = time.monotonic() - polled
        except (TimeoutError, AssertionError, httpx.HTTPError) as exc:
            pytest.fail(f"{exc!r}\n{cluster.diagnostics()}")
        # Read only now, outside the window.
        final = await http.get(
            f"/api/v1/projects/{PROJECT}/executions/{execution_id}",
            params={"workspace_id": WORKSPACE},
        )
    assert final.json()["status"] == "completed", final.text
    assert closed < NOTIFIER_POLL_SECONDS - WINDOW_MARGIN_SECONDS, (
        f"the window closed {closed:.1f} s after the notifier's poll: its next poll may be in it"
    )
    counted: Counts = diff(after, before)
    breakdown = Breakdown(counted)
    report = breakdown.render(
        f"one execution of {AGENT} ({execution_id}, {took:.1f} s)",
        notes=[
            f"budget {STORE_COMMANDS_PER_EXECUTION}; processes {', '.join(sorted(ports))}",
            "periodic sweeps out of the window; the test's own status reads: none (Kafka topic)",
        ],
    )
    print(f"\n{report}")
    total = breakdown.total
    assert total <= STORE_COMMANDS_PER_EXECUTION, report
