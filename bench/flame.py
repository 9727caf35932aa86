"""Flame graphs and CPU per execution of every Interlock process at saturation, for before/after
comparisons of the hot path (docs/profiles/).

``python -m bench.flame --label before`` starts the distributed services (1 sandbox) on the local
Kafka and store (``infra/infra.sh``), warms them up, then runs ``bench-pipeline`` executions at
a rate above saturation and, while they run:

- reads each process's CPU from /proc over the whole load, divided by the executions completed:
  CPU milliseconds per execution per process, and the messages written to each topic per
  execution (printed, and written as ``<label>.json``);
- samples every process with py-spy twice in a row: once as collapsed stacks (summarised: the
  top functions by own time, as the benchmark page shows them), once as an SVG flame graph
  (``<label>/<process>.svg``).

Run it alone on the machine: the figures are only comparable between quiet runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench import profile
from bench.load import fetch_stamps, open_loop
from bench.procstats import cpu_seconds
from bench.targets import Distributed

REPO = Path(__file__).resolve().parent.parent
PARTITIONS = 12


async def measure(label: str, out: Path, rate: float, count: int, seconds: float) -> dict[str, Any]:
    kafka = os.environ["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    mongodb = os.environ["INTERLOCK_MONGODB_URI"]
    workdir = Path(tempfile.mkdtemp(prefix=f"interlock-flame-{label}-"))
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    try:
        await target.start(sandboxes=1)
        client = target.client()
        try:
            # At the load's own rate: the connection pools and thread pools grow to their
            # working size before anything is measured.
            warm = await open_loop(
                client, target.watcher(client), rate=rate, count=min(count, 150),
                message="flame warm-up", timeout=300, pids={},
            )  # fmt: skip
            await fetch_stamps(client, warm)
            pids = target.pids()
            topics_before = await _end_offsets(kafka, target.cluster.topic_prefix)
            before = {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
            started = time.perf_counter()
            load = asyncio.create_task(
                open_loop(
                    client, target.watcher(client), rate=rate, count=count, message="flame",
                    timeout=600, pids=pids,
                )
            )  # fmt: skip
            await asyncio.sleep(2)  # into the steady part of the run
            collapsed = await profile.record(pids, seconds, workdir / "collapsed")
            await profile.record(pids, seconds, out / label, flamegraph=True)
            run = await load
            elapsed = time.perf_counter() - started
            after = {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
            connections = await _connection_counts(target.metrics_ports())
            topics_after = await _end_offsets(kafka, target.cluster.topic_prefix)
        finally:
            await client.aclose()
    finally:
        target.stop()
        await target.drop()
    done = count - len(run.failures())
    cpu_ms = {name: round(1000 * (after[name] - before[name]) / max(done, 1), 2) for name in pids}
    return {
        "label": label,
        "executions": done,
        "failures": run.failures()[:20],
        "seconds": round(elapsed, 1),
        "per_second": round(done / elapsed, 2),
        "cpu_ms_per_execution": cpu_ms,
        "cpu_ms_per_execution_total": round(sum(cpu_ms.values()), 1),
        "store_connections": connections,
        "kafka_messages_per_execution": {
            topic: round((topics_after[topic] - topics_before.get(topic, 0)) / max(done, 1), 2)
            for topic in sorted(topics_after)
            if topics_after[topic] != topics_before.get(topic, 0)
        },
        "top": {
            name: profile.summarise(path)["self_functions"][:8] for name, path in collapsed.items()
        },
    }


async def _end_offsets(kafka: str, prefix: str) -> dict[str, int]:
    """Messages ever written to each of the run's topics (the sum of its partitions' ends)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka)
    await consumer.start()
    try:
        topics = [t for t in await consumer.topics() if t.startswith(prefix)]
        # The run's topics were created with PARTITIONS each (a consumer knows the partitions
        # of the topics it subscribed to only).
        partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    totals: dict[str, int] = {}
    for partition, end in ends.items():
        name = partition.topic.removeprefix(prefix)
        totals[name] = totals.get(name, 0) + end
    return totals


async def _connection_counts(ports: dict[str, int]) -> dict[str, dict[str, float]]:
    """Each process's ``interlock_store_connections_total`` series, from its /metrics."""
    counts: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for name, port in ports.items():
            text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            counts[name] = {
                line.rsplit(" ", 1)[0].removeprefix("interlock_store_connections_total"): float(
                    line.rsplit(" ", 1)[1]
                )
                for line in text.splitlines()
                if line.startswith("interlock_store_connections_total")
            }
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="names the results (before, after, ...)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "profiles")
    parser.add_argument("--rate", type=float, default=40.0, help="executions started a second")
    parser.add_argument("--count", type=int, default=800)
    parser.add_argument("--seconds", type=float, default=8.0, help="each py-spy window")
    args = parser.parse_args()
    result = asyncio.run(measure(args.label, args.out, args.rate, args.count, args.seconds))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.label}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "top"}, indent=1))
    for name, top in result["top"].items():
        print(name, [f"{f['name']} {f['percent']}%" for f in top[:5]])


if __name__ == "__main__":
    main()
