"""Figure 9: executions in flight per sandbox replica, and which limit binds them."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from bench import gauges, hdr, procstats
from bench.figures import Raw, median_throughput, one_run, run_summary
from bench.load import Run
from bench.modes import Mode
from bench.targets import Distributed, Target


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
            run = await one_run(
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
        **median_throughput(runs),
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
    summary = run_summary(run)
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
