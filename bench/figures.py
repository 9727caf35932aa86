"""The measurements of the results page, each against one target system (or peer)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench import analysis, commands, gauges, hdr, prefill, procstats
from bench.load import Execution, Run, fetch_stamps, open_loop
from bench.modes import Mode
from bench.procstats import STORE, rss_bytes
from bench.targets import Distributed, Target
from tests.e2e.cluster import REPO

Raw = list[dict[str, Any]]


def _store_summary(run: Run) -> dict[str, Any]:
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


def _run_summary(run: Run) -> dict[str, Any]:
    completed = len(run.completed())
    return {
        **analysis.throughput(run.executions),
        "cpu_ms_per_execution": analysis.cpu_per_execution(run.cpu, completed),
        **_store_summary(run),
        "cpu": run.cpu,
        "failures": run.failures()[:5],
        "timed_out": run.timed_out,
    }


async def _one_run(
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
    saturated throughput."""
    runs = []
    for index in range(mode.runs):
        run = await _one_run(
            target, rate=mode.saturation_rate, count=mode.saturation_count,
            message="bench", mode=mode, extra_pids=extra_pids,
        )  # fmt: skip
        runs.append(_run_summary(run))
        raw.append({"figure": "throughput", "target": label, "index": index, **run.raw()})
    return _median_throughput(runs)


def _median_throughput(runs: list[dict[str, Any]]) -> dict[str, Any]:
    steady = [r.get("steady_per_second") or r.get("overall_per_second") for r in runs]
    return {
        "runs": runs,
        "per_second": hdr.median_of(steady),
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
        run = await _one_run(
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
                run = await _one_run(
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
    storage_delta = after_storage["bytes"] - before_storage["bytes"]
    return {
        "suspended": held,
        "rss_before_bytes": before_rss,
        "rss_after_bytes": after_rss,
        "rss_growth_bytes": growth,
        "rss_growth_mb_per_10k": round(total_growth / 1e6 * 10_000 / held, 2) if held else None,
        "storage_before": before_storage,
        "storage_after": after_storage,
        "storage_bytes_per_suspended": round(storage_delta / held) if held else None,
    }


async def peer(
    kind: str, mode: Mode, rate: float | None, workdir: Path, mongodb: str, raw: Raw
) -> dict[str, Any]:
    """Figure 5: a peer's saturation and latency runs, each in a fresh process."""
    runs = []
    for index in range(mode.runs):
        data = await _peer_process(
            kind, mode.saturation_rate * 10, mode.peer_saturation_count, mode, workdir, mongodb
        )
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
    throughput = _median_throughput(runs)
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


async def history(
    target: Distributed, mode: Mode, extra_pids: dict[str, int], raw: Raw
) -> dict[str, Any]:
    """Figure 8: the same low-rate run on a store holding only a few executions, then again with
    ``mode.history_prefill`` finished executions stored (copies of one the services ran, made in
    bulk: see bench/prefill.py): store commands, decision -> next step, store CPU."""
    out: dict[str, Any] = {
        "rate_per_second": mode.history_rate,
        "executions_per_run": mode.history_count,
    }
    empty, template = await _history_phase(target, mode, extra_pids, raw, "empty")
    out["empty"] = empty
    if template is None:
        return out
    out["empty"]["stored_executions"] = await _stored_executions(target)
    out["prefill"] = await prefill.clone_finished(
        target.mongodb, target.cluster.database, template, mode.history_prefill
    )
    # A bulk load leaves work behind: PostgreSQL's autovacuum wakes up to a minute later and
    # vacuums and analyzes the new rows (2.5 s of CPU after 20,000 executions, measured, most
    # of it inside the next phase). A history accumulated over weeks has had that done as it
    # grew, so it is done now, and waited out, rather than charged to the executions measured
    # next.
    out["prefill"]["vacuumed"] = await _vacuum(extra_pids)
    out["prefill"]["settled_seconds"] = await _store_settled(extra_pids)
    out["history"], _ = await _history_phase(target, mode, extra_pids, raw, "history")
    out["history"]["stored_executions"] = await _stored_executions(target)
    return out


SETTLED_CPU_SHARE = 0.05
"""The store is settled when it uses less than this share of one core..."""
SETTLED_WINDOWS = 3
"""...over this many consecutive one-second windows."""
SETTLE_TIMEOUT_SECONDS = 300.0


async def _vacuum(extra_pids: dict[str, int]) -> bool:
    """``VACUUM ANALYZE`` the PostgreSQL under a local FerretDB (with ``psql``); False when the
    store is something else, or it could not be done."""
    ferretdb = extra_pids.get(procstats.FERRETDB)
    url = procstats.postgresql_url(ferretdb) if ferretdb else None
    if url is None:
        return False
    try:
        proc = await asyncio.create_subprocess_exec(
            "psql", url, "--quiet", "--command", "VACUUM ANALYZE",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    except FileNotFoundError:
        return False
    _, err = await proc.communicate()
    if proc.returncode != 0:
        failure = err.decode(errors="replace")[-300:]
        print(f"bench: VACUUM ANALYZE failed: {failure}", file=sys.stderr)
        return False
    return True


async def _store_settled(extra_pids: dict[str, int]) -> float | None:
    """Wait until the store's processes are idle; how long that took (None when the store is
    not on this machine, or did not settle within the timeout)."""
    store = {n: p for n, p in extra_pids.items() if n in (procstats.FERRETDB, procstats.POSTGRESQL)}
    if not store:
        return None
    began = time.monotonic()
    quiet = 0
    while time.monotonic() - began < SETTLE_TIMEOUT_SECONDS:
        meter = procstats.CpuMeter.start(store)
        await asyncio.sleep(1.0)
        per_process = meter.stop()["per_process_seconds"]
        assert isinstance(per_process, dict)
        used = sum(per_process.values())
        quiet = quiet + 1 if used < SETTLED_CPU_SHARE else 0
        if quiet >= SETTLED_WINDOWS:
            return round(time.monotonic() - began, 1)
    return None


async def _history_phase(
    target: Distributed, mode: Mode, extra_pids: dict[str, int], raw: Raw, phase: str
) -> tuple[dict[str, Any], str | None]:
    run = await _one_run(
        target, rate=mode.history_rate, count=mode.history_count, message="bench",
        mode=mode, extra_pids=extra_pids,
    )  # fmt: skip
    raw.append({"figure": "history", "phase": phase, **run.raw()})
    done = run.completed()
    summaries, _ = analysis.latencies(done)
    return {
        "completed": len(done),
        "failures": run.failures()[:5],
        "cpu_ms_per_execution": analysis.cpu_per_execution(run.cpu, len(done)),
        **_store_summary(run),
        "decision_to_next_step": summaries["decision_to_next_step"],
        "decision_to_completed": summaries["decision_to_completed"],
    }, (done[0].execution_id if done else None)


async def _stored_executions(target: Distributed) -> int | None:
    """How many executions the store holds (their heads), when it still keeps heads."""
    collections = (await target.storage())["collections"]
    heads = collections.get("executions")
    return None if heads is None else int(heads["documents"])


def sandbox_limits() -> tuple[int, int]:
    """The sandbox's runs in flight and its buffer, as its replicas read them: the harness sets
    neither, so they are its defaults (or what ``INTERLOCK_CONSUMER_*`` in the environment say,
    which the replicas inherit)."""
    from services.sandbox.app import SandboxSettings

    settings = SandboxSettings()
    return settings.consumer_concurrency, settings.consumer_max_held


async def concurrency(
    target: Distributed, mode: Mode, replicas: int, extra_pids: dict[str, int], raw: Raw
) -> dict[str, Any]:
    """Figure 9: ``bench-pipeline`` with a model call of ``mode.concurrency_model_ms`` (awaited,
    as a remote model's call is: a slot held, no CPU), offered at ``mode.concurrency_overload``
    times what the sandboxes' limits admit (replicas x runs in flight / model time): the
    completion rate, and each sandbox's runs in flight as its ``interlock_consumer_in_flight``
    gauge shows them (scraped from ``/metrics`` through the run), with the CPU of every process,
    to tell which limit binds."""
    limit, buffer = sandbox_limits()
    admitted = replicas * limit / (mode.concurrency_model_ms / 1000)
    rate = mode.concurrency_overload * admitted
    prefix = target.cluster.topic_prefix
    message = f"bench model_ms={mode.concurrency_model_ms}"
    # The consumers' processes: the gateway has none, and the largest /metrics (per route).
    ports = {p: port for p, port in target.metrics_ports().items() if not p.startswith("gateway")}
    runs = []
    for index in range(mode.runs):
        sampler = gauges.Sampler(ports)
        async with sampler:
            run = await _one_run(
                target, rate=rate, count=mode.concurrency_count, message=message, mode=mode,
                extra_pids=extra_pids,
            )  # fmt: skip
        calls = await _model_calls(target, run)
        runs.append(_concurrency_run(run, sampler, prefix, calls))
        raw.append(
            {
                "figure": "concurrency",
                "replicas": replicas,
                "index": index,
                "gauges": gauges.as_rows(sampler.samples, prefix),
                "model_calls": calls,
                **run.raw(),
            }
        )
    return {
        **_median_throughput(runs),
        "replicas": replicas,
        "limit_per_replica": limit,
        "buffer_per_replica": buffer,
        "model_ms": mode.concurrency_model_ms,
        "admitted_per_second": round(admitted, 2),
        "offered_per_second": round(rate, 2),
        "executions_per_run": mode.concurrency_count,
        "scrape_seconds": gauges.INTERVAL_SECONDS,
        **{key: hdr.median_of(r.get(key) for r in runs) for key in _CONCURRENCY_MEDIANS},
        "cores_by_process": _median_cores(runs),
        "consumers": _median_consumers(runs),
    }


_CONCURRENCY_MEDIANS = (
    "in_flight_per_replica_peak",
    "in_flight_per_replica_median",
    "held_per_replica_peak",
    "in_flight_total_mean",
    "slot_seconds_per_execution",
    "model_calls_at_once_peak",
    "machine_busy_share",
    "steady_busy_share",
    "interlock_share",
    "infra_share",
)
"""The figures of one concurrency run whose median over runs the summary gives."""


def _concurrency_run(
    run: Run, sampler: gauges.Sampler, prefix: str, calls: list[list[float]]
) -> dict[str, Any]:
    dispatched = f"sandbox:{prefix}execution.dispatched"
    window = _steady_window(run, calls)
    consumers = gauges.summarise(sampler.samples, window)
    sandboxes = [c[dispatched] for _, c in consumers.items() if dispatched in c]
    summary = _run_summary(run)
    total = gauges.total_in_flight(sampler.samples, dispatched, window)
    completed = len(run.completed())
    used = gauges.slot_seconds(sampler.samples, dispatched)
    elapsed = max(run.ended_at - run.started_at, 1e-9)
    capacity = elapsed * (os.cpu_count() or 1)
    per_process = run.cpu.get("per_process_seconds", {})
    infra = sum(v for k, v in per_process.items() if k.startswith(procstats.INFRA_PREFIX))
    return {
        **summary,
        "steady_window": [round(t, 3) for t in window] if window else None,
        "scrapes_failed": sampler.failures,
        "in_flight_per_replica_peak": max((s["in_flight_peak"] for s in sandboxes), default=None),
        # The typical replica: the median over replicas of each one's median sample.
        "in_flight_per_replica_median": hdr.median_of(s["in_flight_median"] for s in sandboxes),
        "held_per_replica_peak": max((s["held_peak"] for s in sandboxes), default=None),
        "in_flight_total_mean": total,
        # How long each execution held a sandbox slot: its model call, and the work of its run
        # to the review and of the run after it. The limits admit replicas x limit / this.
        "slot_seconds_per_execution": round(used / completed, 3) if completed else None,
        "model_calls_at_once_peak": _peak_overlap(calls) if calls else None,
        "machine_busy_share": round(run.cpu.get("machine_busy_seconds", 0) / capacity, 3),
        # The run's fill and drain leave cores idle: busy while the model calls ran is what
        # says whether CPU was short when the slots were in use.
        "steady_busy_share": gauges.busy_share(sampler.busy, window, os.cpu_count() or 1),
        "interlock_share": round(run.cpu.get("measured_seconds", 0) / capacity, 3),
        "infra_share": round(infra / capacity, 3),
        "cores_by_process": {k: round(v / elapsed, 3) for k, v in sorted(per_process.items())},
        "consumers": {
            process: {label.replace(prefix, ""): v for label, v in by_consumer.items()}
            for process, by_consumer in consumers.items()
        },
    }


def _steady_window(run: Run, calls: list[list[float]]) -> tuple[float, float] | None:
    """When the sandboxes were loaded: from the tenth model call's start to the tenth-last
    one's end (the first and last runs fill and empty the slots). Without model calls, the
    middle 80% of the completions (the saturation figure's steady part), else the whole run."""
    if len(calls) >= 10:
        starts, ends = sorted(c[0] for c in calls), sorted(c[1] for c in calls)
        cut = len(calls) // 10
        if ends[-1 - cut] > starts[cut]:
            return starts[cut], ends[-1 - cut]
    done = sorted(e.completed_at for e in run.completed() if e.completed_at)
    low, high = len(done) // 10, len(done) - 1 - len(done) // 10
    if high - low >= 2 and done[high] > done[low]:
        return done[low], done[high]
    return (run.started_at, run.ended_at) if run.ended_at > run.started_at else None


def _median_cores(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Cores each process kept busy over a run (CPU seconds / elapsed), median over runs."""
    names = sorted({name for r in runs for name in r["cores_by_process"]})
    return {n: hdr.median_of(r["cores_by_process"].get(n) for r in runs) for n in names}


def _median_consumers(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each subscription's peak and median in flight and peak held, median over the runs."""
    keys = sorted({(p, c) for r in runs for p, cs in r["consumers"].items() for c in cs})
    out: dict[str, Any] = {}
    for process, consumer in keys:
        found = [r["consumers"].get(process, {}).get(consumer) for r in runs]
        present = [f for f in found if f]
        out.setdefault(process, {})[consumer] = {
            name: hdr.median_of(f[name] for f in present)
            for name in ("in_flight_peak", "in_flight_median", "held_peak")
        }
    return out


async def _model_calls(target: Target, run: Run, concurrency: int = 8) -> list[list[float]]:
    """Each completed execution's model call, [start, end], from its result (the agent keeps
    it in its state): a cross-check of the gauge from what the runs did."""
    client = target.client()
    limit = asyncio.Semaphore(concurrency)

    async def one(execution_id: str) -> list[float] | None:
        async with limit:
            body = await client.get(execution_id)
        found = (body.get("result") or {}).get("model_call")
        return [float(found[0]), float(found[1])] if isinstance(found, list) else None

    try:
        ids = [e.execution_id for e in run.completed() if e.execution_id]
        calls = await asyncio.gather(*(one(i) for i in ids))
    finally:
        await client.aclose()
    return [c for c in calls if c is not None]


def _peak_overlap(calls: list[list[float]]) -> int:
    """The most calls running at one instant (an end at the instant of a start: not
    overlapping)."""
    edges = sorted([(start, 1) for start, _ in calls] + [(end, -1) for _, end in calls])
    running = peak = 0
    for _, change in edges:
        running += change
        peak = max(peak, running)
    return peak
