"""What every scenario runs in: the four services as processes (tests/e2e/cluster.py), the
loopback effects service, a supervisor that restarts what died (as Kubernetes would) and samples
memory, and the collection of an ``Observation`` once the run settled."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymongo import AsyncMongoClient

from shared.domain.execution import Execution
from shared.store.mongo.executions import stored_execution
from tests.chaos.invariants import ConversationRecord, EffectCall, Observation, ProcessStats
from tests.e2e.cluster import SERVICES, Cluster
from tests.e2e.effects import Effects


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Supervisor:
    """Restarts dead service processes every half second and keeps each service's peak RSS.
    ``hold()`` pauses restarts (a scenario that keeps everything down for a while)."""

    cluster: Cluster
    restarts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    peak_rss: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    held: bool = False
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @contextlib.contextmanager
    def hold(self) -> Any:
        self.held = True
        try:
            yield
        finally:
            self.held = False

    async def _loop(self) -> None:
        while True:
            for service, processes in self.cluster.processes.items():
                for process in processes:
                    if process.poll() is None:
                        self.peak_rss[service] = max(self.peak_rss[service], rss_mb(process.pid))
            if not self.held:
                for service in self.cluster.restart_dead():
                    self.restarts[service] += 1
            await asyncio.sleep(0.5)

    def stats(self) -> list[ProcessStats]:
        return [
            ProcessStats(service, self.restarts.get(service, 0), self.peak_rss.get(service, 0.0))
            for service in SERVICES
        ]


def kill(cluster: Cluster, service: str, index: int = 0) -> bool:
    """SIGKILL one process (no cleanup, no flush). False if it was not running."""
    process = cluster.processes[service][index]
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


async def read_store(
    uri: str, database: str, ids: set[str]
) -> tuple[dict[str, Execution], dict[str, list[str]]]:
    """The latest stored version of each execution, and each execution's step keys. Version 1
    is only in the head (``executions``, shared/store/mongo/executions.py), later ones in the
    log, which the head may trail: the newest of both, of those that kept their body (older
    versions of an ended execution are stubs)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, serverSelectionTimeoutMS=10_000
    )
    try:
        db = client[database]
        latest: dict[str, dict[str, Any]] = {}
        whole: dict[str, Execution] = {}
        query = {"execution_id": {"$in": sorted(ids)}}
        heads = db["executions"].find({"_id": {"$in": sorted(ids)}})
        versions = db["execution_versions"].find(query)
        for cursor in (heads, versions):
            async for document in cursor:
                current = latest.get(document["execution_id"])
                newer = current is None or document["version"] > current["version"]
                execution = stored_execution(document)
                if execution is not None and newer:
                    latest[document["execution_id"]] = document
                    whole[document["execution_id"]] = execution
        executions = {k: whole[k] for k in latest}
        steps: dict[str, list[str]] = defaultdict(list)
        async for document in db["steps"].find(query, {"_id": 1, "execution_id": 1}):
            steps[document["execution_id"]].append(str(document["_id"]))
        return executions, dict(steps)
    finally:
        await client.close()


async def observe(
    cluster: Cluster,
    effects: Effects,
    *,
    http: list[Any],
    created: set[str],
    supervisor: Supervisor,
    faults_injected: int,
    conversations: list[ConversationRecord] | None = None,
) -> Observation:
    executions, steps = await read_store(
        cluster.env["INTERLOCK_MONGODB_URI"], cluster.database, created
    )
    calls = [
        EffectCall(key=c["key"], applied=bool(c["applied"]))
        for c in await effects.calls()
        if c["key"].split(":", 1)[0] in created
    ]
    return Observation(
        executions=executions,
        http=http,
        effects=calls,
        steps=steps,
        processes=supervisor.stats(),
        faults_injected=faults_injected,
        tracked=set(created),
        conversations=list(conversations or []),
    )


def fired_faults(folder: Path) -> int:
    """Fault points that fired once (tests' INTERLOCK_FAULTS_ONCE_DIR markers)."""
    return len(list(folder.glob("*.fired"))) if folder.exists() else 0
