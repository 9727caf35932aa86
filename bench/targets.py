"""The systems under test: Interlock as separate processes on Kafka and FerretDB (the e2e
tests' ``Cluster``, reused), and the embedded mode (``interlock dev``: one process, SQLite and
the in-process bus)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Protocol

import httpx
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import AsyncMongoClient

from bench.client import BenchClient
from bench.watchers import ChangesWatcher, KafkaStatusWatcher, Watcher
from tests.e2e.cluster import REPO, Cluster
from tests.ports import free_port

PROJECT = "bench"
WORKSPACE = "bench"
# Load generators race the limiter on purpose; the limiter has tests of its own.
NO_RATE_LIMIT = {
    "INTERLOCK_RATE_LIMIT_PER_SECOND": "100000",
    "INTERLOCK_RATE_LIMIT_BURST": "100000",
}


class Target(Protocol):
    name: str

    def client(self) -> BenchClient: ...

    def watcher(self, client: BenchClient) -> Watcher: ...

    def pids(self) -> dict[str, int]: ...

    def metrics_ports(self) -> dict[str, int]:
        """Each process's health listener (its /metrics counts store commands); empty where
        commands are not counted."""
        ...

    async def storage(self) -> dict[str, Any]: ...

    def stop(self) -> None: ...


class Distributed:
    """Gateway, orchestrator, notifier and N sandboxes, each its own process."""

    name = "distributed"

    def __init__(self, *, kafka: str, mongodb: str, workdir: Path, partitions: int) -> None:
        self.kafka = kafka
        self.mongodb = mongodb
        self.cluster = Cluster(kafka=kafka, mongodb=mongodb, workdir=workdir)
        self.cluster.env.update(NO_RATE_LIMIT)
        self.cluster.env["INTERLOCK_TOPIC_PARTITIONS"] = str(partitions)
        self.cluster.env["INTERLOCK_MONGODB_DATABASE"] = f"bench_{self.cluster.run_id}"
        # Production's gauge interval, not the tests' quick one: the measured system is the
        # one that would be deployed (each refresh counts executions in the store).
        self.cluster.env.pop("INTERLOCK_METRICS_POLL_SECONDS", None)
        self.partitions = partitions
        self._key = ""

    async def start(self, sandboxes: int) -> None:
        await asyncio.to_thread(self.cluster.create_topics)
        self.cluster.start("gateway", "orchestrator", "notifier")
        for _ in range(sandboxes):
            self.cluster.start("sandbox")
        await self.cluster.wait_ready(timeout=120)
        self._key = await self.cluster.key(PROJECT)

    async def add_sandboxes(self, count: int) -> None:
        for _ in range(count):
            self.cluster.start("sandbox")
        await self.cluster.wait_ready(timeout=120)

    def sandboxes(self) -> int:
        return len(self.cluster.processes["sandbox"])

    def client(self) -> BenchClient:
        return BenchClient(self.cluster.base_url, self._key, project=PROJECT, workspace=WORKSPACE)

    def langgraph_endpoint(self) -> tuple[str, str]:
        """The base URL ``langgraph-sdk`` is given for the gateway's LangGraph routes (the
        bench workspace), and the key it sends."""
        url = f"{self.cluster.base_url}/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
        return url, self._key

    def watcher(self, client: BenchClient) -> Watcher:
        topic = f"{self.cluster.topic_prefix}execution.status"
        return KafkaStatusWatcher(self.kafka, topic, self.partitions)

    def pids(self) -> dict[str, int]:
        return {
            f"{service}-{i}": process.pid
            for service, processes in self.cluster.processes.items()
            for i, process in enumerate(processes)
            if process.poll() is None
        }

    def metrics_ports(self) -> dict[str, int]:
        return {
            f"{service}-{i}": self.cluster.health_ports[(service, i)]
            for service, processes in self.cluster.processes.items()
            for i, process in enumerate(processes)
            if process.poll() is None and (service, i) in self.cluster.health_ports
        }

    async def storage(self) -> dict[str, Any]:
        return await mongo_storage(self.mongodb, self.cluster.database)

    def stop(self) -> None:
        self.cluster.stop()

    async def drop(self) -> None:
        client: AsyncMongoClient[Any] = AsyncMongoClient(self.mongodb)
        try:
            await client.drop_database(self.cluster.database)
        finally:
            await client.close()
        await self.cluster.delete_topics()


async def mongo_storage(uri: str, database: str) -> dict[str, Any]:
    """Bytes per collection two ways: what the server allocated for data and indexes
    (``collStats``; FerretDB answers it too) and the encoded size of the documents themselves.

    The server's figure grows a storage page at a time (8 kB on PostgreSQL), so a few documents
    more often move it by nothing; the documents' own size moves with every byte written.
    """
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri)
    try:
        db = client[database]
        raw = CodecOptions(document_class=RawBSONDocument)
        collections: dict[str, Any] = {}
        for name in sorted(await db.list_collection_names()):
            stats = await db.command("collStats", name)
            documents = db.get_collection(name, codec_options=raw).find({}, batch_size=1000)
            collections[name] = {
                "documents": int(stats.get("count", 0)),
                "bytes": int(stats.get("size", 0)) + int(stats.get("totalIndexSize", 0)),
                "data_bytes": sum([len(doc.raw) async for doc in documents]),
            }
        return {
            "bytes": sum(c["bytes"] for c in collections.values()),
            "data_bytes": sum(c["data_bytes"] for c in collections.values()),
            "collections": collections,
        }
    finally:
        await client.close()


class Embedded:
    """``interlock dev``: the four services in one process on SQLite and the in-process bus."""

    name = "embedded"
    DEV_KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"

    def __init__(self, *, workdir: Path) -> None:
        self.workdir = workdir
        self.data = workdir / "data"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        await asyncio.to_thread(self.data.mkdir, parents=True, exist_ok=True)
        env = {
            **os.environ,
            **NO_RATE_LIMIT,
            "INTERLOCK_ENVIRONMENT": "development",
            "INTERLOCK_LOG_FORMAT": "json",
        }
        for name in ("INTERLOCK_KAFKA_BOOTSTRAP_SERVERS", "INTERLOCK_MONGODB_URI"):
            env.pop(name, None)  # embedded: nothing outside the process
        self.process = await asyncio.to_thread(self._spawn, env)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}") as http:
            for _ in range(600):
                if self.process.poll() is not None:
                    raise RuntimeError(f"interlock dev exited; see {self.workdir}")
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("interlock dev did not become ready in 60 s")

    def _spawn(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "interlock.cli", "dev", "--port", str(self.port)]
        with (self.workdir / "interlock-dev.log").open("ab") as log:
            return subprocess.Popen(
                [*command, "--data", str(self.data)],
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def client(self) -> BenchClient:
        # A workspace per run: the watcher follows it (and lists it after a reconnect).
        workspace = f"{WORKSPACE}-{uuid.uuid4().hex[:8]}"
        base = f"http://127.0.0.1:{self.port}"
        return BenchClient(base, self.DEV_KEY, project="demo", workspace=workspace)

    def watcher(self, client: BenchClient) -> Watcher:
        return ChangesWatcher(client)

    def pids(self) -> dict[str, int]:
        alive = self.process is not None and self.process.poll() is None
        return {"interlock-dev": self.process.pid} if alive and self.process else {}

    def metrics_ports(self) -> dict[str, int]:
        return {}  # SQLite files in-process: no MongoDB commands to count

    async def storage(self) -> dict[str, Any]:
        files = {p.name: p.stat().st_size for p in sorted(self.data.glob("*.sqlite*"))}
        return {"bytes": sum(files.values()), "files": files}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
