"""The benchmark harness runs end to end (``python -m bench --smoke``) so it cannot rot: every
figure is produced from this run's own measurements. Timings are never asserted here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.goals import DBOS_POSTGRES
from bench.run import PEERS
from tests.e2e.cluster import REPO

pytestmark = pytest.mark.e2e

FIGURES_OF_DISTRIBUTED = ("throughput", "latency", "replay", "idle")
LATENCIES = ("invoke_to_suspended", "decision_to_next_step", "decision_to_completed")


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _latency_is_measured(latency: dict[str, Any]) -> None:
    for name in LATENCIES:
        figure = latency["median"][name]
        assert figure["count"] > 0, name
        assert all(_real(figure[k]) and figure[k] > 0 for k in ("p50_ms", "p99_ms", "p99_9_ms"))


@pytest.mark.timeout(600)
def test_smoke_run_writes_every_figure_from_its_own_measurements(
    kafka_bootstrap: str, mongodb_uri: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "INTERLOCK_MONGODB_URI": mongodb_uri,
    }
    docs = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(tmp_path), "--docs", str(docs)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    summary = json.loads((tmp_path / "summary.json").read_text())
    raw = json.loads((tmp_path / "raw.json").read_text())
    assert summary["mode"] == "smoke" and summary["machine"]["cores"] >= 1
    dist = summary["figures"]["distributed"]
    assert set(FIGURES_OF_DISTRIBUTED) <= set(dist)

    # Figure 1: a real rate, and CPU measured for the services of this run.
    one = dist["throughput"]["1"]
    assert _real(one["per_second"]) and one["per_second"] > 0
    assert _real(one["cpu_ms_per_execution"]) and one["cpu_ms_per_execution"] > 0
    assert not any(run["failures"] for run in one["runs"])
    # Figure 2, and the peers' figures: each percentile rests on executions of this run.
    _latency_is_measured(dist["latency"])
    _latency_is_measured(summary["figures"]["embedded"]["latency"])
    for kind, peer in summary["figures"]["peers"].items():
        assert peer["throughput"]["per_second"] > 0, kind
        _latency_is_measured(peer["latency"])
    # DBOS on PostgreSQL: its own process's CPU, and its server's apart when that is here (by
    # default the server FerretDB runs on).
    on_postgres = summary["figures"]["peers"][DBOS_POSTGRES]["throughput"]
    assert _real(on_postgres["cpu_ms_per_execution"])
    if "infra:postgresql" in summary["store"]["processes"]:
        assert _real(on_postgres["store_cpu_ms_per_execution"])
    # Figure 3: the cached steps were stored and served.
    for steps, replay in dist["replay"].items():
        assert replay["runs"][0]["cached_steps_stored"] >= int(steps)
        assert _real(replay["replay_us_per_step"]) and _real(replay["bulk_read_ms"])
    # Figure 4: every execution held suspended, memory and storage read from this run.
    idle = dist["idle"]
    assert idle["suspended"] == summary["mode_settings"]["idle_count"]
    assert idle["storage_bytes_per_suspended"] > 0
    assert set(idle["rss_after_bytes"]) == set(idle["rss_before_bytes"])

    # Figure 7: store commands per execution, counted by the services themselves, and the
    # store's CPU when it runs on this machine.
    counted = one["store_commands_per_execution"]
    assert counted["total"] > 0
    assert {"gateway", "orchestrator", "sandbox", "checkpointer"} <= set(counted["by_service"])
    assert _real(dist["sweeps"]["per_second"]) and dist["sweeps"]["seconds"] > 0
    if summary["store"]["processes"]:
        assert _real(one["store_cpu_ms_per_execution"]) and one["store_cpu_ms_per_execution"] > 0
    # Figure 8: the same run before and after the history was stored in bulk.
    history = summary["figures"]["history"]
    settings = summary["mode_settings"]
    assert history["prefill"]["executions"] == settings["history_prefill"]
    assert sum(history["prefill"]["inserted"].values()) >= settings["history_prefill"]
    for phase in ("empty", "history"):
        assert history[phase]["completed"] == settings["history_count"], history[phase]
        assert history[phase]["store_commands"]["total"] > 0
        assert history[phase]["decision_to_next_step"]["count"] > 0
    assert history["history"]["stored_executions"] > settings["history_prefill"]

    # Figures 9 and 10: executions in flight per sandbox replica, memory under a backlog.
    concurrency = summary["figures"]["concurrency"]
    assert set(concurrency) == {"1", "3"}, concurrency
    backlog = [e for e in raw if e["figure"] == "backlog"]
    assert len(backlog) == 1 and backlog[0]["points"], backlog
    assert summary["figures"]["backlog"]["held_peak"] <= summary["figures"]["backlog"]["buffer"]

    # Each summary figure of executions is backed by raw executions with their times.
    own_shape = ("backlog", "sdk-workload", "turns")
    executions = [
        e for entry in raw if entry["figure"] not in own_shape for e in entry["executions"]
    ]
    completed = [e for e in executions if e["status"] == "completed"]
    assert completed and all(e["resumed_at"] and e["decided_at"] for e in completed)
    assert {t["name"] for t in summary["targets"]} and set(summary["ratios"]) == set(PEERS)

    # Section 12: both servers ran the langgraph-sdk workload, every run timed by the client.
    sdk = summary["figures"]["sdk_workload"]
    for system, name in (("interlock", "interlock"), ("agent_server", "agent-server")):
        [runs] = [e for e in raw if e["figure"] == "sdk-workload" and e["system"] == name]
        assert len(runs["sequential"]) == sdk[system]["sequential"]["completed"] > 0, system
        assert len(runs["concurrent"]) == sdk[system]["concurrent"]["completed"] > 0, system
        for run in runs["sequential"] + runs["concurrent"]:
            assert run["error"] is None
            assert run["started"] < run["interrupted"] <= run["resumed"] < run["completed"]

    # Section 13: every turn of every conversation completed, its commands counted and the
    # bytes it left read back.
    turns = summary["figures"]["turns"]
    assert turns["turns"] == settings["turns_count"] and not turns["failures"], turns["failures"]
    for row in turns["per_turn"]:
        assert row["completed"] == settings["turns_conversations"], row
        assert row["commands"] > 0 and row["checkpoint_bytes"] and row["state_bytes"], row
    assert turns["paired"]["later"]["requests"] == settings["turns_paired"]
    [windows] = [e for e in raw if e["figure"] == "turns"]
    assert len(windows["windows"]) == settings["turns_count"]

    page = docs.read_text()
    assert "## Targets" in page and "## 6." not in page  # smoke mode does not profile
    assert "## 7. The store" in page and "## 8. History growth" in page
    assert f"{one['per_second']:,.2f}" in page
    assert "## 12. One langgraph-sdk workload" in page
    assert "## 13. A conversation's turns" in page
