"""Runs Interlock's four services as separate processes against real Kafka and MongoDB.

Each cluster gets its own topic prefix, consumer groups and database, so test runs never see
each other's messages or documents.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from shared.crypto import new_key_entry
from shared.senders import MessageSigner, new_key_pair
from tests.langgraph_sdk import webhook_receiver
from tests.ports import free_port

SERVICES = ("gateway", "orchestrator", "sandbox", "notifier")
OUTSIDE_PRODUCERS = {"e2e-owner": "PROJECT_OWNER", "e2e-member": "PROJECT_MEMBER"}
"""Outside producers registered with every cluster, by role (shared/senders.py)."""
OUTSIDE_PRODUCER_PROJECTS = ("proj-topics", "proj-e2e", "proj-bus", "proj-push")


def decision_keys(run_id: str) -> dict[str, str]:
    """A gateway decision key pair of its own for one cluster."""
    private, public = new_key_pair()
    key_id = f"e2e-{run_id}"
    return {
        "INTERLOCK_DECISION_SIGNING_KEY": f"{key_id}:{private}",
        "INTERLOCK_DECISION_VERIFY_KEYS": f"{key_id}:{public}",
    }


REPO = Path(__file__).resolve().parents[2]
CORS_ORIGIN = "https://chat.e2e.example"


class Cluster:
    def __init__(self, *, kafka: str, mongodb: str, workdir: Path) -> None:
        self.run_id = uuid.uuid4().hex[:10]
        self.workdir = workdir
        # Made here (it may exist already): the producers file is written before any process.
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.ledger = workdir / "ledger.jsonl"
        self.env = {
            **os.environ,
            "INTERLOCK_ENVIRONMENT": "test",
            "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS": kafka,
            "INTERLOCK_MONGODB_URI": mongodb,
            "INTERLOCK_MONGODB_DATABASE": f"e2e_{self.run_id}",
            "INTERLOCK_TOPIC_PREFIX": f"e2e-{self.run_id}.",
            "INTERLOCK_TOPIC_PARTITIONS": "3",
            "INTERLOCK_CONSUMER_GROUP_PREFIX": f"e2e-{self.run_id}",
            "INTERLOCK_PORT": str(self.port),
            "INTERLOCK_LOG_FORMAT": "json",
            "INTERLOCK_AGENT_LEDGER": str(self.ledger),
            # Tests poll and race on purpose; the rate limit has a test of its own.
            "INTERLOCK_RATE_LIMIT_PER_SECOND": "1000",
            "INTERLOCK_RATE_LIMIT_BURST": "2000",
            # A page the gateway lets a browser call it from, as a deployment configures its UI's
            # (tests/langgraph_sdk/connect_flows.py); outside development none is by default.
            "INTERLOCK_CORS_ORIGINS": CORS_ORIGIN,
            # Gauges measured every second, so a test sees them move within moments.
            "INTERLOCK_METRICS_POLL_SECONDS": "1",
            # One key for every process, as the deployments share one Secret: without it each
            # process makes its own in-memory key, so the sandbox could not open the custom
            # headers a gateway sealed (nor one gateway replica read another's cursors).
            "INTERLOCK_ENCRYPTION_KEYS": new_key_entry(f"e2e-{self.run_id}"),
            # The gateway signs its decisions with a key of its own (as in production, not the
            # development pair); the orchestrator holds the public half and the producers file.
            **decision_keys(self.run_id),
            "INTERLOCK_DECISION_PRODUCERS_FILE": str(self._write_producers()),
            # Runs' webhooks signed with the flows' receiver's secret, and let reach it on
            # loopback (tests/langgraph_sdk/webhook_receiver.py).
            **webhook_receiver.ENV,
        }
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {s: [] for s in SERVICES}
        self._log_starts: dict[tuple[str, int], int] = {}
        self.health_ports: dict[tuple[str, int], int] = {}
        self._slot_env: dict[tuple[str, int], dict[str, str]] = {}
        """Each process slot's own settings, which a restart in that slot keeps."""
        self._retired: set[int] = set()
        """Processes stopped on purpose (``retire``): not a failure, not waited for."""
        """Where each process's log began at its latest start (logs are appended to)."""
        self.base_url = f"http://127.0.0.1:{self.port}"

    def _write_producers(self) -> Path:
        """Register the outside producers the tests play (``producer_keys`` holds their private
        keys, as an operator hands them out)."""
        self.producer_keys: dict[str, str] = {}
        tables = []
        for name, role in OUTSIDE_PRODUCERS.items():
            private, public = new_key_pair()
            self.producer_keys[name] = private
            projects = ", ".join(f'"{p}"' for p in OUTSIDE_PRODUCER_PROJECTS)
            tables.append(
                f'[producers.{name}]\npublic_key = "{public}"\nrole = "{role}"\n'
                f"projects = [{projects}]\n"
            )
        path = self.workdir / "producers.toml"
        path.write_text("\n".join(tables))
        return path

    def producer(self, name: str = "e2e-owner") -> MessageSigner:
        """The signer of one registered outside producer."""
        return MessageSigner.for_producer(name, self.producer_keys[name])

    @property
    def topic_prefix(self) -> str:
        return self.env["INTERLOCK_TOPIC_PREFIX"]

    @property
    def database(self) -> str:
        return self.env["INTERLOCK_MONGODB_DATABASE"]

    def create_topics(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "interlock.cli", "topics", "create"],
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self, *services: str, env: dict[str, str] | None = None) -> None:
        """Start one more process of each service (a replica if one runs already)."""
        for service in services or SERVICES:
            index = len(self.processes[service])
            path = self.workdir / f"{service}-{index}.log"
            self._log_starts[(service, index)] = path.stat().st_size if path.exists() else 0
            log = path.open("ab")
            # As in Kubernetes, every process serves its health endpoints and /metrics on a port
            # of its own (the gateway too: its /metrics is kept off the public port), and every
            # consumer is a static group member under a name its restarts keep (its pod's name).
            self.health_ports[(service, index)] = free_port()
            own = {"INTERLOCK_HEALTH_PORT": str(self.health_ports[(service, index)])}
            if service != "gateway":
                own["INTERLOCK_KAFKA_GROUP_INSTANCE_ID"] = f"{service}-{index}"
            self._slot_env[(service, index)] = {**own, **(env or {})}
            process = subprocess.Popen(
                [sys.executable, "-m", "interlock.cli", "service", service],
                env={**self.env, **self._slot_env[(service, index)]},
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            self.processes[service].append(process)

    async def delete_topics(self) -> None:
        """Delete this run's topics: a local broker kept across runs otherwise collects
        thousands of them, and every one is a log it recovers at start and a partition it
        tracks (measured: 13,573 partition folders after a few days of test runs)."""
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.errors import KafkaError

        admin = AIOKafkaAdminClient(bootstrap_servers=self.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"])
        try:
            async with asyncio.timeout(30):
                await admin.start()
                ours = [t for t in await admin.list_topics() if t.startswith(self.topic_prefix)]
                if ours:
                    await admin.delete_topics(ours)
        except (TimeoutError, KafkaError, OSError) as exc:
            # Housekeeping only: what the run tested is decided already.
            print(f"cluster: topics {self.topic_prefix}* not deleted: {exc!r}", file=sys.stderr)
        finally:
            await admin.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Cluster]:
        """Topics created, every service started and ready; all stopped and the topics deleted
        on the way out."""
        self.create_topics()
        self.start()
        try:
            await self.wait_ready()
            yield self
        finally:
            self.stop()
            await self.delete_topics()

    def restart_dead(self) -> list[str]:
        """Start again every process that exited, as Kubernetes restarts a container: in the same
        slot, with the same settings (its port, its member name, what ``start`` was given)."""
        restarted = []
        for service, processes in self.processes.items():
            for i, process in enumerate(processes):
                if process.poll() is not None:
                    path = self.workdir / f"{service}-{i}.log"
                    self._log_starts[(service, i)] = path.stat().st_size if path.exists() else 0
                    log = path.open("ab")
                    processes[i] = subprocess.Popen(
                        [sys.executable, "-m", "interlock.cli", "service", service],
                        env={**self.env, **self._slot_env.get((service, i), {})},
                        cwd=REPO,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                    restarted.append(service)
        return restarted

    def retire(self, service: str, index: int, timeout: float = 60) -> None:
        """Stop one replica with SIGTERM, as a rolling update or a scale-down does."""
        process = self.processes[service][index]
        process.terminate()
        process.wait(timeout=timeout)
        self._retired.add(process.pid)

    def kill(self, service: str, index: int) -> None:
        """Kill one replica (SIGKILL: no shutdown of any kind), on purpose: not a failure."""
        process = self.processes[service][index]
        process.kill()
        process.wait(timeout=20)
        self._retired.add(process.pid)

    def send_signal(self, service: str, sig: int, index: int = 0) -> None:
        self.processes[service][index].send_signal(sig)

    def stop(self, *services: str, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        for service in services or SERVICES:
            for process in self.processes[service]:
                if process.poll() is None:
                    process.send_signal(sig)
            for process in self.processes[service]:
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            self.processes[service] = []

    def _not_started(self) -> list[str]:
        """Consumers that have not logged ``service.started`` since their latest start: a test
        must not begin with a replica short (one that crashed at start-up, say)."""
        waiting = []
        for service, processes in self.processes.items():
            if service == "gateway":
                continue  # answers /readyz instead
            for index, process in enumerate(processes):
                if process.pid in self._retired:
                    continue
                path = self.workdir / f"{service}-{index}.log"
                with path.open("rb") as log:
                    log.seek(self._log_starts.get((service, index), 0))
                    if b'"event": "service.started"' not in log.read():
                        waiting.append(f"{service}-{index}")
        return waiting

    def running(self, service: str) -> bool:
        return any(p.poll() is None for p in self.processes[service])

    async def wait_ready(self, timeout: float = 60) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        async with httpx.AsyncClient(base_url=self.base_url) as client:
            while True:
                for service in SERVICES:
                    for process in self.processes[service]:
                        if process.poll() is not None and process.pid not in self._retired:
                            raise RuntimeError(f"{service} exited early:\n{self.log_tail(service)}")
                try:
                    gateway_ready = (await client.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    gateway_ready = False
                waiting = self._not_started()
                if gateway_ready and not waiting:
                    return
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError(
                        f"not ready: gateway {'ready' if gateway_ready else 'not ready'},"
                        f" not started: {waiting}\n{self.diagnostics()}"
                    )
                await asyncio.sleep(0.2)

    async def key(
        self,
        project: str,
        role: str = "PROJECT_OWNER",
        *,
        workspaces: list[str] | None = None,
        email: str | None = None,
    ) -> str:
        """A fresh API key of ``project`` (written straight to the cluster's database, as
        ``interlock keys create`` does), of the person ``email`` when given."""
        from shared.store.api_keys import Role, create_key
        from shared.store.mongo import MongoStore

        store = MongoStore.connect(self.env["INTERLOCK_MONGODB_URI"], self.database)
        try:
            _, secret = await create_key(
                store.api_keys,
                project_id=project,
                role=Role(role),
                name=f"test-{role.lower()}",
                workspaces=workspaces,
                email=email,
            )
            return secret
        finally:
            await store.close()

    def log_tail(self, service: str, lines: int = 40) -> str:
        chunks = []
        for path in sorted(self.workdir.glob(f"{service}-*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            chunks.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(chunks)

    def logs(self) -> str:
        return "\n".join(self.log_tail(s, 200) for s in SERVICES)

    def diagnostics(self, lines: int = 25, width: int = 400) -> str:
        """What a failed test report shows: each process's state and the end of its log, without
        the start-up and heartbeat chatter that would push the interesting lines out."""
        chunks = [f"run {self.run_id}, topics {self.topic_prefix}*, database {self.database}"]
        for service, processes in self.processes.items():
            for index, process in enumerate(processes):
                chunks.append(f"{service}-{index}: pid {process.pid}, {_state_of(process)}")
        for path in sorted(self.workdir.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            kept = [line[:width] for line in text if not any(n in line for n in _NOISE)]
            chunks.append(f"--- {path.name} (last {lines} of {len(kept)} lines)")
            chunks.extend(kept[-lines:])
        return "\n".join(chunks)


_NOISE = ('"agent.loaded"', "Heartbeat failed for group")


def _state_of(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is not None:
        return f"exited {process.returncode}"
    try:
        state = Path(f"/proc/{process.pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return "running"
    return "stopped (SIGSTOP)" if state == "T" else "running"
