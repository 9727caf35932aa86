"""A Kafka broker and a FerretDB of the scenario's own, for the scenarios that kill or stop them.

The shared broker and FerretDB (``infra/infra.sh``, ports 19092 / 27117) serve every other test
running on the machine, so they are never touched. These run on free loopback ports, from the
jars and the binary ``infra.sh`` provisioned (``make chaos`` runs ``infra.sh up`` first, which
downloads / builds them on a clean machine), with the same settings ``infra.sh`` uses, FerretDB's
telemetry off. Each process is ours by its ``Popen`` handle: stopping one never looks processes
up by name.

FerretDB uses the backend ``infra.sh`` runs (``INTERLOCK_INFRA_FERRETDB_BACKEND``, default
PostgreSQL). On PostgreSQL its data lives in a database of its own on ``infra.sh``'s PostgreSQL
server, created at start and dropped at stop; killing FerretDB kills what the services talk to
(the store's wire protocol, its connections and in-flight statements, which PostgreSQL rolls
back), while the server keeps the data, as in a deployment. On SQLite the files are under the
scenario's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient
from pymongo import AsyncMongoClient

from tests.e2e.cluster import REPO
from tests.eventually import eventually
from tests.ports import free_port

SHARED = REPO / ".infra"
KAFKA_LIBS = SHARED / "kafka" / "libs"
FERRETDB_BIN = SHARED / "bin" / "ferretdb"
LOG4J = REPO / "infra" / "kafka" / "log4j2.properties"
HOST = "127.0.0.1"
# What infra.sh records for a running FerretDB and PostgreSQL, and the role FerretDB connects as.
BACKEND_FILE = SHARED / "ferretdb.backend"
POSTGRES_PORT_FILE = SHARED / "postgres.port"
POSTGRES_ROLE = "interlock"


def ferretdb_backend() -> str:
    """The setting if given, else the backend of infra.sh's running FerretDB, else its default."""
    configured = os.environ.get("INTERLOCK_INFRA_FERRETDB_BACKEND")
    if configured:
        return configured
    with contextlib.suppress(FileNotFoundError):
        return BACKEND_FILE.read_text().strip()
    return "postgresql"


def _psql() -> str:
    """Debian's psql of the newest installed server (the one infra.sh runs), else any psql."""
    found = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin/psql") if p.parts[-3].isdigit()),
        key=lambda p: int(p.parts[-3]),
    )
    if found:
        return str(found[-1])
    return shutil.which("psql") or "psql"


class PrivateInfra:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.kafka_port = free_port()
        self.controller_port = free_port()
        self.mongo_port = free_port()
        self.backend = ferretdb_backend()
        # A database of the scenario's own on the shared PostgreSQL server (postgresql backend).
        self.pg_database = f"chaos_{uuid.uuid4().hex[:12]}"
        self.pg_port: int | None = None
        self.kafka: subprocess.Popen[bytes] | None = None
        self.ferretdb: subprocess.Popen[bytes] | None = None

    @property
    def kafka_bootstrap(self) -> str:
        return f"{HOST}:{self.kafka_port}"

    @property
    def mongodb_uri(self) -> str:
        return f"mongodb://{HOST}:{self.mongo_port}/"

    # --- Kafka ---------------------------------------------------------------------------------

    def _kafka_conf(self) -> Path:
        data = self.folder / "kafka-data"
        data.mkdir(parents=True, exist_ok=True)
        conf = self.folder / "server.properties"
        conf.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@{HOST}:{self.controller_port}",
                    f"listeners=PLAINTEXT://{HOST}:{self.kafka_port},"
                    f"CONTROLLER://{HOST}:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://{HOST}:{self.kafka_port}",
                    "inter.broker.listener.name=PLAINTEXT",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={data}",
                    "auto.create.topics.enable=false",
                    "num.partitions=1",
                    "default.replication.factor=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "num.network.threads=2",
                    "num.io.threads=2",
                    "",
                ]
            )
        )
        return conf

    def _java(self, *args: str, log_name: str) -> list[str]:
        return [
            "java",
            "-Xms128m",
            "-Xmx384m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J}",
            f"-Dkafka.logs.dir={self.folder}",
            f"-Dkafka.log.name={log_name}",
            "-cp",
            f"{KAFKA_LIBS}/*",
            *args,
        ]

    def _format_kafka(self, conf: Path) -> None:
        if (self.folder / "kafka-data" / "meta.properties").exists():
            return
        cluster_id = subprocess.run(
            self._java("kafka.tools.StorageTool", "random-uuid", log_name="kafka-format"),
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout.split()[-1]
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(conf),
                log_name="kafka-format",
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    async def start_kafka(self) -> None:
        conf = self._kafka_conf()
        await asyncio.to_thread(self._format_kafka, conf)
        self.kafka = self._spawn(
            self._java("kafka.Kafka", str(conf), log_name="kafka"), self.folder / "kafka.out"
        )
        await eventually(self._kafka_answers, bool, timeout=120, interval=0.5, what="Kafka")

    async def _kafka_answers(self) -> bool:
        assert self.kafka is not None
        if self.kafka.poll() is not None:
            raise RuntimeError(f"private Kafka exited {self.kafka.returncode}; see {self.folder}")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.kafka_bootstrap, request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return True
        except Exception:  # not up yet: any client error means "try again"
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()

    # --- FerretDB ------------------------------------------------------------------------------

    def _postgres(self, sql: str) -> None:
        assert self.pg_port is not None
        subprocess.run(
            [
                _psql(),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                HOST,
                "-p",
                str(self.pg_port),
                "-U",
                POSTGRES_ROLE,
                "-d",
                "postgres",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "5", "LC_ALL": "C"},
        )

    def _create_database(self) -> None:
        try:
            self.pg_port = int(POSTGRES_PORT_FILE.read_text().strip())
        except (FileNotFoundError, ValueError) as exc:
            raise RuntimeError(
                f"infra.sh's PostgreSQL is not running ({POSTGRES_PORT_FILE}): "
                "run `bash infra/infra.sh up` first"
            ) from exc
        self._postgres(f'CREATE DATABASE "{self.pg_database}"')

    def _drop_database(self) -> None:
        if self.pg_port is None:
            return
        # FORCE ends sessions FerretDB may have left behind.
        self._postgres(f'DROP DATABASE IF EXISTS "{self.pg_database}" WITH (FORCE)')
        self.pg_port = None

    def _storage_args(self) -> list[str]:
        if self.backend == "postgresql":
            return [
                "--handler=postgresql",
                f"--postgresql-url=postgres://{POSTGRES_ROLE}@{HOST}:{self.pg_port}/"
                f"{self.pg_database}",
            ]
        data = self.folder / "ferretdb-data"
        data.mkdir(parents=True, exist_ok=True)
        return ["--handler=sqlite", f"--sqlite-url=file:{data}/"]

    async def start_ferretdb(self) -> None:
        state = self.folder / "ferretdb-state"
        state.mkdir(parents=True, exist_ok=True)
        self.ferretdb = self._spawn(
            [
                str(FERRETDB_BIN),
                *self._storage_args(),
                f"--state-dir={state}",
                f"--listen-addr={HOST}:{self.mongo_port}",
                "--debug-addr=-",
                "--telemetry=disable",
                "--test-telemetry-url=http://127.0.0.1:9/",
                "--log-level=warn",
            ],
            self.folder / "ferretdb.log",
            env={"DO_NOT_TRACK": "1", "FERRETDB_TELEMETRY": "disable", "PATH": "/usr/bin:/bin"},
        )
        await eventually(self._mongo_answers, bool, timeout=60, interval=0.3, what="FerretDB")

    async def _mongo_answers(self) -> bool:
        assert self.ferretdb is not None
        if self.ferretdb.poll() is not None:
            raise RuntimeError(f"private FerretDB exited {self.ferretdb.returncode}")
        client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
            self.mongodb_uri, serverSelectionTimeoutMS=2000
        )
        try:
            await client.admin.command("ping")
            return True
        except Exception:  # not up yet
            return False
        finally:
            await client.close()

    @staticmethod
    def _spawn(
        command: list[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    # --- both ----------------------------------------------------------------------------------

    async def start(self, *, kafka: bool = True) -> None:
        """Both, or (``kafka=False``) only FerretDB, for tests of the store alone."""
        for needed in (KAFKA_LIBS, FERRETDB_BIN) if kafka else (FERRETDB_BIN,):
            if not needed.exists():
                raise RuntimeError(f"{needed} is missing: run `bash infra/infra.sh up` once")
        if self.backend not in ("postgresql", "sqlite"):
            raise RuntimeError(f"unknown FerretDB backend {self.backend!r}")
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.backend == "postgresql":
            await asyncio.to_thread(self._create_database)
        await asyncio.gather(*([self.start_kafka()] if kafka else []), self.start_ferretdb())

    @staticmethod
    def _kill(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGKILL) -> None:
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def kill_kafka(self) -> None:
        self._kill(self.kafka)

    def kill_ferretdb(self) -> None:
        self._kill(self.ferretdb)

    async def stop(self) -> None:
        self._kill(self.kafka, signal.SIGTERM)
        self._kill(self.ferretdb, signal.SIGTERM)
        try:
            await asyncio.to_thread(self._drop_database)
        except (OSError, subprocess.SubprocessError) as exc:
            # A leftover scratch database costs only disk (`infra.sh purge` removes it); the
            # scenario's own outcome must not be replaced by this error.
            print(f"chaos: could not drop the database {self.pg_database}: {exc}", flush=True)
