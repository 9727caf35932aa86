"""The measurements of the results page, each against one target system (or peer); figure 8
is in ``bench/history_figure.py``, figure 9 in ``bench/concurrency_figure.py``."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench import analysis, commands, hdr
from bench.load import Execution, Run, fetch_stamps, open_loop
from bench.modes import Mode
from bench.procstats import STORE, rss_bytes
from bench.targets import Distributed, Target
from tests.e2e.cluster import REPO

Raw = list[dict[str, Any]]


def store_summary(run: Run) -> dict[str, Any]:
    """The store's share of a run: its CPU and the commands sent to it, per completed
    execution."""
    completed = len(run.completed())
    counted = None
    if run.commands is not None:
        counted = commands.per_execution(commands.from_rows(run.commands), completed)
    return {
        "store_cpu_ms_per_execution": analysis.cpu_per_execution(run.cpu, completed, STORE),
        "store_commands": counted,
    }


def run_summary(run: Run) -> dict[str, Any]:
    completed = len(run.completed())
    return {
        **analysis.throughput(run.executions),
        "cpu_ms_per_execution": analysis.cpu_per_execution(run.cpu, completed),
        **store_summary(run),
        "cpu": run.cpu,
        "failures": run.failures()[:5],
        "timed_out": run.timed_out,
    }


async def one_run(
    target: Target, *, rate: float, count: int, message: str, mode: Mode, extra_pids: dict[str, int]
) -> Run:
    """One open-loop run. Where the target's processes serve /metrics, the store commands they
    made from the first invoke until the last execution ended are counted (the harness's own
    reads of the results afterwards are not)."""
    client = target.client()
    ports = target.metrics_ports()
    try:
        async with httpx.AsyncClient(timeout=10) as metrics:
            before = await commands.scrape(metrics, ports) if ports else None
            run = await open_loop(
                client,
                target.watcher(client),
                rate=rate,
                count=count,
                message=message,
                timeout=mode.timeout,
                pids={**target.pids(), **extra_pids},
            )
            if before is not None:
                after = await commands.scrape(metrics, ports)
                run.commands = commands.as_rows(commands.diff(after, before))
        await fetch_stamps(client, run)
        return run
    finally:
        await client.aclose()


async def saturation(
    target: Target, mode: Mode, extra_pids: dict[str, int], raw: Raw, label: str
) -> dict[str, Any]:
    """Figure 1: arrivals offered far above capacity; the steady completion rate is the
    saturated throughput. Every system is offered the same load, the peers' (``peer``): at the
    mode's own rate a system faster than it (the embedded mode, at 20 a second in quick mode)
    could never show more than that rate."""
    rate, count = saturation_load(mode)
    runs = []
    for index in range(mode.runs):
        run = await one_run(
            target, rate=rate, count=count, message="bench", mode=mode, extra_pids=extra_pids,
        )  # fmt: skip
        runs.append(run_summary(run))
        raw.append({"figure": "throughput", "target": label, "index": index, **run.raw()})
    return median_throughput(runs)


def median_throughput(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over runs of each run's overall rate: its completions over the time from its
    first arrival to its last completion. A saturation run offers a burst (quick mode: 40
    arrivals in 0.2 s), whose completions bunch together: the rate over the middle 80% of them
    (each run's ``steady_per_second``, kept) then measured the bunching, not the system (the
    embedded mode: 774 to 938/s that way, 16 to 21/s overall, in three runs)."""
    overall = [r.get("overall_per_second") for r in runs]
    return {
        "runs": runs,
        "per_second": hdr.median_of(overall),
        "cpu_ms_per_execution": hdr.median_of(r.get("cpu_ms_per_execution") for r in runs),
        "store_cpu_ms_per_execution": hdr.median_of(
            r.get("store_cpu_ms_per_execution") for r in runs
        ),
        "store_commands_per_execution": _median_commands(r.get("store_commands") for r in runs),
    }


def _median_commands(counted: Any) -> dict[str, Any] | None:
    """The median over runs of the commands per execution, in all and by service."""
    runs = [c for c in counted if c]
    if not runs:
        return None
    services = sorted({s for c in runs for s in c["by_service"]})
    return {
        "total": hdr.median_of(c["total"] for c in runs),
        "by_service": {
            s: hdr.median_of(c["by_service"].get(s, 0.0) for c in runs) for s in services
        },
    }


async def sweeps(target: Target, seconds: float) -> dict[str, Any] | None:
    """The store commands of the periodic sweeps: counted while no execution runs."""
    ports = target.metrics_ports()
    if not ports:
        return None
    async with httpx.AsyncClient(timeout=10) as metrics:
        return await commands.rate(metrics, ports, seconds)


async def latency(
    target: Target, mode: Mode, rate: float, extra_pids: dict[str, int], raw: Raw, label: str
) -> dict[str, Any]:
    """Figure 2: open-loop arrivals at ``rate`` (half the saturated throughput)."""
    count = max(mode.latency_min_count, round(rate * mode.latency_seconds))
    runs = []
    for index in range(mode.runs):
        run = await one_run(
            target, rate=rate, count=count, message="bench", mode=mode, extra_pids=extra_pids
        )
        summaries, encoded = analysis.latencies(run.completed())
        runs.append({**summaries, "throughput": analysis.throughput(run.executions)})
        raw.append(
            {"figure": "latency", "target": label, "index": index, "hdr": encoded, **run.raw()}
        )
    return _median_latency(rate, count, runs)


def _median_latency(rate: float, count: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rate_per_second": round(rate, 3),
        "executions_per_run": count,
        "runs": runs,
        "median": {
            name: hdr.median_summary([r[name] for r in runs]) for name in analysis.LATENCIES
        },
    }


async def replay(target: Distributed, mode: Mode, raw: Raw) -> dict[str, Any]:
    """Figure 3: resume time with N cached steps before the interrupt; the agent times the
    re-run of its node (the N cache hits) and the harness times the one bulk read."""
    from shared.store.mongo import MongoStore

    out: dict[str, Any] = {}
    store = MongoStore.connect(target.mongodb, target.cluster.database)
    try:
        for steps in mode.replay_steps:
            runs = []
            for index in range(mode.runs):
                run = await one_run(
                    target, rate=1, count=1, message=f"bench steps={steps}", mode=mode,
                    extra_pids={},
                )  # fmt: skip
                raw.append({"figure": "replay", "steps": steps, "index": index, **run.raw()})
                runs.append(await _replay_summary(run, steps, store))
            out[str(steps)] = {
                "runs": runs,
                "resume_ms": hdr.median_of(r.get("resume_ms") for r in runs),
                "replay_us_per_step": hdr.median_of(r.get("replay_us_per_step") for r in runs),
                "bulk_read_ms": hdr.median_of(r.get("bulk_read_ms") for r in runs),
            }
    finally:
        await store.close()
    return out


async def _replay_summary(run: Run, steps: int, store: Any) -> dict[str, Any]:
    done = run.completed()
    if not done:
        return {"failures": run.failures()}
    e = done[0]
    assert e.execution_id is not None
    began = time.perf_counter()
    cached = await store.steps.load(e.execution_id)  # what StepRun.open reads, in one query
    bulk = time.perf_counter() - began
    resume = (e.resumed_at - e.decided_at) if e.resumed_at and e.decided_at else None
    return {
        "cached_steps_stored": len(cached),
        "resume_ms": round(resume * 1000, 3) if resume is not None else None,
        "replay_us_per_step": (
            round(e.replay_seconds * 1e6 / steps, 3) if e.replay_seconds is not None else None
        ),
        "bulk_read_ms": round(bulk * 1000, 3),
    }


async def idle(target: Target, mode: Mode, rate: float, raw: Raw) -> dict[str, Any]:
    """Figure 4: RSS of every process and storage before and after holding N executions
    suspended."""
    before_rss = {name: rss_bytes(pid) for name, pid in target.pids().items()}
    before_storage = await target.storage()
    client = target.client()
    try:
        run = await open_loop(
            client, target.watcher(client), rate=rate, count=mode.idle_count,
            message="bench", timeout=mode.timeout, pids=target.pids(), approve=False,
        )  # fmt: skip
    finally:
        await client.aclose()
    raw.append({"figure": "idle", **run.raw()})
    await asyncio.sleep(2)  # let in-flight writes and buffers settle before reading RSS
    after_rss = {name: rss_bytes(pid) for name, pid in target.pids().items()}
    after_storage = await target.storage()
    held = sum(1 for e in run.executions if e.status == "suspended")
    growth = {
        name: (after_rss[name] or 0) - (before or 0)
        for name, before in before_rss.items()
        if name in after_rss
    }
    total_growth = sum(growth.values())
    # Per execution from the documents' own bytes where the target can count them (the store's
    # allocation grows by whole pages; a few executions often move it by none), else the files.
    measure = "data_bytes" if "data_bytes" in after_storage else "bytes"
    storage_delta = after_storage[measure] - before_storage[measure]
    allocated_delta = after_storage["bytes"] - before_storage["bytes"]
    return {
        "suspended": held,
        "rss_before_bytes": before_rss,
        "rss_after_bytes": after_rss,
        "rss_growth_bytes": growth,
        "rss_growth_mb_per_10k": round(total_growth / 1e6 * 10_000 / held, 2) if held else None,
        "storage_before": before_storage,
        "storage_after": after_storage,
        "storage_bytes_per_suspended": round(storage_delta / held) if held else None,
        "storage_measure": measure,
        "allocated_bytes_per_suspended": round(allocated_delta / held) if held else None,
    }


def saturation_load(mode: Mode) -> tuple[float, int]:
    """The arrivals (a second) and executions of every saturation run, Interlock's and the
    peers' alike."""
    return mode.saturation_rate * 10, mode.peer_saturation_count


async def peer(
    kind: str, mode: Mode, rate: float | None, workdir: Path, mongodb: str, raw: Raw
) -> dict[str, Any]:
    """Figure 5: a peer's saturation and latency runs, each in a fresh process."""
    rate_offered, count_offered = saturation_load(mode)
    runs = []
    for index in range(mode.runs):
        data = await _peer_process(kind, rate_offered, count_offered, mode, workdir, mongodb)
        raw.append({"figure": "peer-throughput", "peer": kind, "index": index, **data})
        executions = [Execution(**e) for e in data["executions"]]
        completed = sum(1 for e in executions if e.status == "completed")
        runs.append(
            {
                **analysis.throughput(executions),
                "cpu_ms_per_execution": analysis.cpu_per_execution(data["cpu"], completed),
                # its database server's, when it runs on one here (dbos-postgres), apart
                "store_cpu_ms_per_execution": analysis.cpu_per_execution(
                    data["cpu"], completed, STORE
                ),
                "cpu": data["cpu"],
                "failures": [e.error for e in executions if e.error][:3],
            }
        )
    throughput = median_throughput(runs)
    latency_rate = rate if rate is not None else (throughput["per_second"] or 1) / 2
    count = max(mode.latency_min_count, round(latency_rate * mode.latency_seconds))
    latency_runs = []
    for index in range(mode.runs):
        data = await _peer_process(kind, latency_rate, count, mode, workdir, mongodb)
        executions = [Execution(**e) for e in data["executions"]]
        summaries, encoded = analysis.latencies(executions)
        latency_runs.append({**summaries, "throughput": analysis.throughput(executions)})
        raw.append({"figure": "peer-latency", "peer": kind, "index": index, "hdr": encoded, **data})
    return {"throughput": throughput, "latency": _median_latency(latency_rate, count, latency_runs)}


async def _peer_process(
    kind: str, rate: float, count: int, mode: Mode, workdir: Path, mongodb: str
) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.peers", kind, "--rate", str(rate), "--count", str(count),
        "--timeout", str(mode.timeout), "--workdir", str(workdir / kind), "--mongodb", mongodb,
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"peer {kind} failed: {err.decode(errors='replace')[-800:]}")
    return dict(json.loads(out.decode().strip().splitlines()[-1]))
