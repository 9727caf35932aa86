"""Issue 35, item 3: what one langgraph-sdk execution costs the separate-process services on
real Kafka and FerretDB, against the same execution through the native API. The SDK's calls
as an application makes them (``threads.create``, ``runs.wait`` to the interrupt, ``runs.wait``
with the resume: bench/peers/sdk_workload.py), the native one as the store-command budget's test
makes it (invoke, resume; statuses read on ``execution.status``, which costs the services
nothing).

Counted as tests/e2e/test_store_commands.py counts (every process's own
``interlock_store_command_seconds`` histograms, bench/commands.py), with the periodic sweeps and
the agent-version cache's expiry out of the window; the notifier is left out (its delivery poll
comes every minute whatever runs, and it does the same for both). Kafka messages are the topics'
end offsets before and after. Counts are deterministic, so the gateway's are asserted exactly:

- native: the key (2 requests), the execution's insert, the decision's head read and claim;
- langgraph-sdk: the key (3 requests), the thread's insert, read (2 runs) and turn hint, the
  first turn's insert (no read before it: the thread has started none), the decision's read of
  the turn the hint names and the resume route's read and claim, and no read when a run stops
  (the change that says so carries the execution).

The other services do the same work for both but for a thread's turn: the orchestrator looks
for the turn after it when it ends (2 commands). The LangGraph routes add no Kafka message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.commands import Breakdown, Counts, diff, settle
from bench.peers import sdk_workload
from tests.e2e.cluster import Cluster
from tests.e2e.test_store_commands import (
    HOUR,
    PROJECT,
    QUIET_SECONDS,
    WORKSPACE,
    StatusFeed,
    run_one,
)

pytestmark = pytest.mark.e2e
T = TypeVar("T")

NATIVE_GATEWAY = {
    ("api_keys", "find"): 2,
    ("executions", "insert"): 1,
    ("executions", "find"): 1,
    ("decision_claims", "insert"): 1,
}
SDK_GATEWAY = {
    ("api_keys", "find"): 3,
    ("threads", "insert"): 1,
    ("threads", "find"): 2,
    ("threads", "update"): 1,
    ("executions", "insert"): 1,
    ("executions", "find"): 2,
    ("decision_claims", "insert"): 1,
}
NEXT_TURN_PROBE = 2
"""The orchestrator's look for the turn after an ended one: a miss is the head, then version 1
(the layout before heads)."""


@dataclass
class Counting:
    cluster: Cluster
    ports: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
async def counting(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Counting]:
    cluster = Cluster(
        kafka=kafka_bootstrap, mongodb=mongodb_uri, workdir=tmp_path_factory.mktemp("lgcommands")
    )
    cluster.env.update(
        {
            "INTERLOCK_DEADLINE_POLL_SECONDS": HOUR,
            "INTERLOCK_METRICS_POLL_SECONDS": HOUR,
            "INTERLOCK_THREAD_RETENTION_POLL_SECONDS": HOUR,
            "INTERLOCK_CRON_POLL_SECONDS": HOUR,
            # Read once by the warm-up, then cached through the window.
            "INTERLOCK_AGENT_VERSIONS_CACHE_SECONDS": HOUR,
        }
    )
    cluster.create_topics()
    cluster.start()
    try:
        await cluster.wait_ready()
        ports = {
            f"{s}-{i}": port for (s, i), port in cluster.health_ports.items() if s != "notifier"
        }
        yield Counting(cluster, ports)
    finally:
        cluster.stop()


class TopicEnds:
    """The cluster's topics read as an outside system may (partitions assigned, no group):
    ``total`` is every message they hold, their end offsets summed. Costs the services
    nothing."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._bootstrap = cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap, enable_auto_commit=False
        )
        self._assigned: list[TopicPartition] = []

    async def __aenter__(self) -> TopicEnds:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap)
        await admin.start()
        try:
            prefix = self._cluster.topic_prefix
            topics = [t for t in await admin.list_topics() if t.startswith(prefix)]
            described = await admin.describe_topics(topics)
        finally:
            await admin.close()
        self._assigned = [
            TopicPartition(topic["topic"], partition["partition"])
            for topic in described
            for partition in topic["partitions"]
        ]
        await self._consumer.start()
        self._consumer.assign(self._assigned)
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._consumer.stop()

    async def total(self) -> int:
        return sum((await self._consumer.end_offsets(self._assigned)).values())


@dataclass
class Cost:
    commands: Breakdown
    messages: int

    def of(self, service: str) -> dict[tuple[str, str], int]:
        return {
            (collection, command): n
            for (process, collection, command), n in self.commands.counts.items()
            if process.startswith(f"{service}-")
        }

    def besides(self, service: str) -> int:
        return self.commands.total - sum(self.of(service).values())


async def cost_of(
    counting: Counting,
    metrics: httpx.AsyncClient,
    ends: TopicEnds,
    run: Callable[[], Awaitable[T]],
) -> tuple[Cost, T]:
    """What ``run`` costs, from settled counts before it to settled counts after it."""
    before: Counts = await settle(metrics, counting.ports, quiet=QUIET_SECONDS, timeout=30)
    sent = await ends.total()
    result = await run()
    after = await settle(metrics, counting.ports, quiet=QUIET_SECONDS, timeout=60)
    return Cost(Breakdown(diff(after, before)), await ends.total() - sent), result


@pytest.mark.timeout(300)
async def test_a_langgraph_sdk_execution_costs_what_the_native_one_does_and_the_threads_share(
    counting: Counting,
) -> None:
    cluster = counting.cluster
    key = await cluster.key(PROJECT)
    topic = f"{cluster.topic_prefix}execution.status"
    partitions = int(cluster.env["INTERLOCK_TOPIC_PARTITIONS"])
    url = f"{cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
    sdk = sdk_workload.client_for(url, key)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with (
            httpx.AsyncClient(base_url=cluster.base_url, headers=headers, timeout=30) as http,
            httpx.AsyncClient(timeout=10) as metrics,
            StatusFeed(cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"], topic, partitions) as feed,
            TopicEnds(cluster) as ends,
        ):
            # First-time costs (indexes, agent versions, the key's first use...) paid here.
            await run_one(http, feed)
            warm = await sdk_workload.one(sdk)
            assert warm.error is None, warm.error
            native, _ = await cost_of(counting, metrics, ends, lambda: run_one(http, feed))
            through_sdk, timed = await cost_of(
                counting, metrics, ends, lambda: sdk_workload.one(sdk)
            )
            assert timed.error is None, timed.error
    except (TimeoutError, AssertionError, httpx.HTTPError) as exc:
        pytest.fail(f"{exc!r}\n{cluster.diagnostics()}")
    finally:
        await sdk.aclose()
    report = "\n".join(
        [
            through_sdk.commands.render("one langgraph-sdk execution"),
            native.commands.render("the same through the native API"),
            f"Kafka messages: langgraph-sdk {through_sdk.messages}, native {native.messages}",
        ]
    )
    print(f"\n{report}")
    assert native.of("gateway") == NATIVE_GATEWAY, report
    assert through_sdk.of("gateway") == SDK_GATEWAY, report
    assert through_sdk.besides("gateway") == native.besides("gateway") + NEXT_TURN_PROBE, report
    assert through_sdk.messages == native.messages, report
