"""Runs chaos scenarios: a fresh cluster per scenario, the scenario's faults under load, then the
invariant checker over everything that happened; prints the table and writes it as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.watchers import KafkaStatusWatcher
from tests.chaos.harness import Supervisor, fired_faults, observe
from tests.chaos.invariants import Verdict, check
from tests.chaos.private_infra import PrivateInfra
from tests.chaos.workload import Workload, client_limits
from tests.e2e.cluster import Cluster
from tests.e2e.effects import Effects

PROJECT = "proj-chaos"
DEBUG_TASKS_TOKEN = os.environ.get("INTERLOCK_CHAOS_DEBUG_TASKS_TOKEN") or uuid.uuid4().hex
"""What each process's ``/debug/tasks`` asks for (it is off without a token): a run that hangs is
diagnosed by reading it on the processes' health ports (``cluster.health_ports``), as the soak's
hang was (docs/reliability.md). Set INTERLOCK_CHAOS_DEBUG_TASKS_TOKEN to choose it; each
scenario's folder holds the one in use (``debug-tasks-token``), next to the processes' logs."""


@dataclass
class Context:
    """What a scenario acts on."""

    cluster: Cluster
    effects: Effects
    workload: Workload
    supervisor: Supervisor
    workdir: Path
    infra: PrivateInfra | None
    faults: int = 0
    """Process deaths caused on purpose (signals sent); fault points add theirs at the end."""
    extra: dict[str, list[str]] = field(default_factory=dict)
    """Violations only the scenario can see (a poison message not dead-lettered, say)."""
    notes: list[str] = field(default_factory=list)

    def violation(self, invariant: str, detail: str) -> None:
        self.extra.setdefault(invariant, []).append(detail)


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Context], Awaitable[None]]
    quick: bool = False
    """Part of the short subset (``make test``)."""
    sandboxes: int = 2
    faults: str = ""
    """``INTERLOCK_FAULTS`` (shared/faults.py): named points that crash or stall, once each."""
    private_infra: bool = False
    """Kills or stops Kafka / FerretDB: runs on a broker and a database of its own."""
    settle_seconds: float = 180
    settle_idle_seconds: float | None = None
    """Stop settling early once no execution moved for this long (a long backlog's scenarios:
    ``settle_seconds`` is then only the cap)."""
    description: str = ""
    env: dict[str, str] = field(default_factory=dict)
    """More environment for every service process."""
    effects_delay_ms: int = 0
    """How long the effects service takes to answer (the agents' emails: slow runs)."""


@dataclass
class Row:
    scenario: str
    faults: int
    executions: int
    lost: int
    duplicated: int
    stuck: int
    server_errors: int
    unavailable: int
    unanswered: int
    seconds: float
    ok: bool
    violations: dict[str, list[str]]
    notes: list[str]
    error: str | None = None

    @classmethod
    def failed(cls, name: str, started: float, error: str) -> Row:
        return cls(
            name, 0, 0, 0, 0, 0, 0, 0, 0, round(time.monotonic() - started, 1), False, {}, [], error
        )


async def run_scenario(scenario: Scenario, *, kafka: str, mongodb: str, workdir: Path) -> Row:
    started = time.monotonic()
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    infra = None
    effects = Effects(delay_ms=scenario.effects_delay_ms)
    cluster: Cluster | None = None
    supervisor: Supervisor | None = None
    try:
        if scenario.private_infra:
            infra = PrivateInfra(workdir / "infra")
            await infra.start()
            kafka, mongodb = infra.kafka_bootstrap, infra.mongodb_uri
        await effects.wait_ready()
        cluster = Cluster(kafka=kafka, mongodb=mongodb, workdir=workdir)
        faults_dir = workdir / "faults"
        cluster.env.update(
            {
                "INTERLOCK_EFFECTS_URL": effects.url,
                # Kafka notices a dead or frozen consumer after the session timeout.
                "INTERLOCK_KAFKA_SESSION_TIMEOUT_MS": "6000",
                "INTERLOCK_FAULTS_ONCE_DIR": str(faults_dir),
                # Production's gauge interval: the e2e tests' 1 s would add four services'
                # store counts and broker queries every second to the load under test.
                "INTERLOCK_METRICS_POLL_SECONDS": "15",
                "INTERLOCK_DEBUG_TASKS_TOKEN": DEBUG_TASKS_TOKEN,
            }
        )
        cluster.env.update(scenario.env)
        await asyncio.to_thread((workdir / "debug-tasks-token").write_text, DEBUG_TASKS_TOKEN)
        if scenario.faults:
            # In every process's environment, restarts included: each named point lives in one
            # service, and the once-folder makes it fire once across all of them.
            cluster.env["INTERLOCK_FAULTS"] = scenario.faults
        cluster.create_topics()
        cluster.start("orchestrator", "notifier", "gateway")
        for _ in range(scenario.sandboxes):
            cluster.start("sandbox")
        await cluster.wait_ready(timeout=120)
        secret = await cluster.key(PROJECT)
        supervisor = Supervisor(cluster)
        supervisor.start()
        async with httpx.AsyncClient(
            base_url=cluster.base_url,
            timeout=30,
            headers={"Authorization": f"Bearer {secret}"},
            limits=client_limits(),
        ) as client:
            workload = Workload(client, project=PROJECT, workspace=f"ws-{uuid.uuid4().hex[:6]}")
            # Reviewers' clients look at an execution when its status changes, not in a loop.
            watcher = KafkaStatusWatcher(
                kafka,
                f"{cluster.topic_prefix}execution.status",
                int(cluster.env["INTERLOCK_TOPIC_PARTITIONS"]),
            )
            await watcher.start(workload.nudge)
            workload.watched = True
            try:
                ctx = Context(cluster, effects, workload, supervisor, workdir, infra)
                await scenario.run(ctx)
                await workload.settle(scenario.settle_seconds, idle=scenario.settle_idle_seconds)
            finally:
                await watcher.stop()
            http = Counter(r.status for r in workload.http)
            ctx.notes.append(
                f"{workload.nudges} status announcements; HTTP answers "
                + ", ".join(f"{status}: {n}" for status, n in sorted(http.items(), key=str))
            )
            observation = await observe(
                cluster,
                effects,
                http=workload.http,
                created=workload.created,
                supervisor=supervisor,
                faults_injected=ctx.faults + fired_faults(faults_dir),
                conversations=workload.conversations,
            )
        verdict = check(observation)
        for invariant, details in ctx.extra.items():
            for detail in details:
                verdict.add(invariant, detail)
        return _row(scenario.name, verdict, observation.faults_injected, started, ctx.notes)
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc))[-3000:]
        if cluster is not None:
            detail += "\n" + cluster.diagnostics(lines=10)
        return Row.failed(scenario.name, started, detail)
    finally:
        if supervisor is not None:
            await supervisor.stop()
        if cluster is not None:
            cluster.stop()
        effects.stop()
        if infra is not None:
            await infra.stop()


def _row(name: str, verdict: Verdict, faults: int, started: float, notes: list[str]) -> Row:
    return Row(
        scenario=name,
        faults=faults,
        executions=verdict.executions,
        lost=verdict.lost,
        duplicated=verdict.duplicated,
        stuck=verdict.stuck,
        server_errors=verdict.server_errors,
        unavailable=verdict.unavailable,
        unanswered=verdict.unanswered,
        seconds=round(time.monotonic() - started, 1),
        ok=verdict.ok,
        violations={k: v for k, v in verdict.violations.items() if v},
        notes=notes,
    )


COLUMNS = [
    ("scenario", "scenario", 28),
    ("faults", "faults", 6),
    ("executions", "execs", 5),
    ("lost", "lost", 4),
    ("duplicated", "dup", 4),
    ("stuck", "stuck", 5),
    ("server_errors", "5xx", 4),
    ("unavailable", "503", 4),
    ("unanswered", "noans", 5),
    ("seconds", "secs", 6),
    ("ok", "ok", 4),
]


def table(rows: list[Row]) -> str:
    head = " ".join(f"{title:<{width}}" for _, title, width in COLUMNS)
    lines = [head, "-" * len(head)]
    for row in rows:
        data = row.__dict__
        cells = []
        for key, _, width in COLUMNS:
            value = data[key]
            text = ("yes" if value else "NO") if isinstance(value, bool) else str(value)
            cells.append(f"{text:<{width}}")
        lines.append(" ".join(cells))
    for row in rows:
        if row.error:
            lines.append(f"\n{row.scenario}: ERROR\n{row.error}")
        for invariant, details in row.violations.items():
            shown = details[:5] + ([f"... {len(details) - 5} more"] if len(details) > 5 else [])
            lines.append(f"{row.scenario}: {invariant}: " + "; ".join(shown))
    return "\n".join(lines)


def write_json(rows: list[Row], path: Path, *, mode: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document: dict[str, Any] = {
        "mode": mode,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ok": all(r.ok for r in rows),
        "scenarios": [r.__dict__ for r in rows],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


def default_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="interlock-chaos-"))


def settings_from_env() -> tuple[str, str]:
    kafka = os.environ.get("INTERLOCK_KAFKA_BOOTSTRAP_SERVERS")
    mongodb = os.environ.get("INTERLOCK_MONGODB_URI")
    if not kafka or not mongodb:
        raise SystemExit(
            "set INTERLOCK_KAFKA_BOOTSTRAP_SERVERS and INTERLOCK_MONGODB_URI"
            ' (eval "$(bash infra/infra.sh up)"), or run `make chaos`'
        )
    return kafka, mongodb
