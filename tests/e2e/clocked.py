"""A cluster whose clock is a file the test moves forward (``INTERLOCK_CLOCK_FILE``), with two
orchestrator replicas as separate processes: what the tests of the sweeps (deadlines, thread
retention) run on, so that "once across replicas" is tested with more than one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from tests.e2e.cluster import Cluster


@asynccontextmanager
async def clocked_cluster(
    *, kafka: str, mongodb: str, workdir: Path, now: datetime, env: dict[str, str]
) -> AsyncIterator[Cluster]:
    clock = workdir / "clock"
    clock.write_text(now.isoformat())
    cluster = Cluster(kafka=kafka, mongodb=mongodb, workdir=workdir / "cluster")
    cluster.env |= {"INTERLOCK_CLOCK_FILE": str(clock), **env}
    cluster.create_topics()
    cluster.start("gateway", "sandbox", "notifier")
    cluster.start("orchestrator")
    cluster.start("orchestrator")
    try:
        await cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()


def set_clock(cluster: Cluster, now: datetime) -> None:
    Path(cluster.env["INTERLOCK_CLOCK_FILE"]).write_text(now.isoformat())
