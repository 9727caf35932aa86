"""One benchmark session: every figure of the mode, written as raw and summary JSON, then the
results page regenerated from the summary."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import (
    backlog,
    concurrency_figure,
    figures,
    goals,
    hdr,
    history_figure,
    idle_streams,
    machine,
    profile,
    sdk_figure,
    turns,
)
from bench.load import fetch_stamps, open_loop
from bench.modes import Mode
from bench.peers import postgres
from bench.procstats import infra_pids, store_pids
from bench.targets import Distributed, Embedded, Target
from tests.e2e.cluster import REPO

PARTITIONS = 6
PEERS = ("langgraph-mongodb", "langgraph-sqlite", "dbos-sqlite", goals.DBOS_POSTGRES)
SECOND_STORE_URI = "INTERLOCK_BENCH_SECOND_MONGODB_URI"
"""A second MongoDB-compatible store (say FerretDB on its SQLite backend beside the PostgreSQL
one): when set, the distributed saturation runs against it too."""
SECOND_STORE_LABEL = "INTERLOCK_BENCH_SECOND_LABEL"
"""How the page names the second store (default: its FerretDB version and backend, when it runs
on this machine)."""
STORE_LABEL = "INTERLOCK_BENCH_STORE_LABEL"


LOW_LOAD = 0.1
"""The low-load latency figure's arrivals, as a fraction of the 1-sandbox saturated rate: the
latency of an execution that waits for nothing but its own round trips."""


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


async def _warm_up(target: Target, message: str = "bench warm-up") -> None:
    """One execution first, so imports, connections and JIT-free first-call costs are paid
    before anything is timed."""
    client = target.client()
    try:
        run = await open_loop(
            client, target.watcher(client), rate=1, count=2, message=message,
            timeout=120, pids={},
        )  # fmt: skip
        await fetch_stamps(client, run)
        if run.failures():
            raise RuntimeError(f"warm-up failed: {run.failures()}")
    finally:
        await client.aclose()


async def _distributed(
    mode: Mode, kafka: str, mongodb: str, workdir: Path, raw: list[Any]
) -> dict[str, Any]:
    infra = infra_pids(REPO / ".infra", mongodb)
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    out: dict[str, Any] = {"throughput": {}, "partitions": PARTITIONS}
    try:
        log("distributed: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        await _warm_up(target)
        log(f"store commands of the periodic sweeps, {mode.sweep_seconds:g}s idle")
        out["sweeps"] = await figures.sweeps(target, mode.sweep_seconds)
        for replicas in mode.sandbox_replicas:
            if replicas > target.sandboxes():
                log(f"distributed: adding sandboxes up to {replicas}")
                await target.add_sandboxes(replicas - target.sandboxes())
                await _warm_up(target)  # the new replicas get partitions and load agents
            log(f"figure 1: saturation with {replicas} sandbox(es), {mode.runs} runs")
            out["throughput"][str(replicas)] = await figures.saturation(
                target, mode, infra, raw, f"distributed-{replicas}"
            )
            if replicas == 1:
                saturated = out["throughput"]["1"]["per_second"] or 1.0
                out["latency_rate"] = rate = saturated / 2
                log(f"figure 2: latency at {rate:.2f}/s (half of {saturated:.2f}/s)")
                out["latency"] = await figures.latency(target, mode, rate, infra, raw, "dist")
                out["latency_low_rate"] = low = saturated * LOW_LOAD
                log(f"figure 2: latency at {low:.2f}/s ({LOW_LOAD:.0%} of {saturated:.2f}/s)")
                out["latency_low"] = await figures.latency(
                    target, mode, low, infra, raw, "dist-low"
                )
                if mode.profile_seconds > 0:
                    out["profile"] = await _profile(target, mode, workdir, saturated)
                log(f"figure 3: replay with {mode.replay_steps} cached steps")
                out["replay"] = await figures.replay(target, mode, raw)
                if mode.peers:  # its peer, the Agent Server, is measured with the others
                    out["sdk_workload"] = await sdk_figure.interlock(target, mode, raw, log)
        log(f"figure 4: {mode.idle_count} executions held suspended")
        out["idle"] = await figures.idle(target, mode, mode.saturation_rate, raw)
        out["processes"] = sorted(target.pids())
    finally:
        target.stop()
        await target.drop()
    return out


async def _history(
    mode: Mode, kafka: str, mongodb: str, workdir: Path, raw: list[Any]
) -> dict[str, Any]:
    """Figure 8 on a database of its own: the prefilled history must not weigh on the other
    figures."""
    infra = infra_pids(REPO / ".infra", mongodb)
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    try:
        log("history growth: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        await _warm_up(target)
        log(
            f"figure 8: {mode.history_count} executions at {mode.history_rate:g}/s, then again"
            f" with {mode.history_prefill:,} finished executions stored"
        )
        return await history_figure.history(target, mode, infra, raw)
    finally:
        target.stop()
        await target.drop()


async def _concurrency(
    mode: Mode, kafka: str, mongodb: str, workdir: Path, raw: list[Any]
) -> dict[str, Any]:
    """Figure 9 on a database of its own (its executions must not weigh on the other figures'
    store), with 1 sandbox, then more, as ``mode.concurrency_replicas`` says."""
    infra = infra_pids(REPO / ".infra", mongodb)
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    # The model call's path (the scripted model's first call) is warmed up too.
    warm_up = f"bench warm-up model_ms={min(mode.concurrency_model_ms, 10)}"
    out: dict[str, Any] = {}
    try:
        log("concurrency: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        await _warm_up(target, warm_up)
        for replicas in mode.concurrency_replicas:
            if replicas > target.sandboxes():
                log(f"concurrency: adding sandboxes up to {replicas}")
                await target.add_sandboxes(replicas - target.sandboxes())
                await _warm_up(target, warm_up)
            log(
                f"figure 9: {mode.concurrency_count} executions with a {mode.concurrency_model_ms}"
                f" ms model call, {replicas} sandbox(es), {mode.runs} runs"
            )
            out[str(replicas)] = await concurrency_figure.concurrency(
                target, mode, replicas, infra, raw
            )
    finally:
        target.stop()
        await target.drop()
    return out


async def _backlog(mode: Mode, kafka: str, workdir: Path, raw: list[Any]) -> dict[str, Any]:
    """Figure 10: one consumer with the sandbox's limits under a backlog."""
    limit, buffer = concurrency_figure.sandbox_limits()
    log(
        f"figure 10: a backlog of {mode.backlog_messages:,} messages for one consumer"
        f" ({limit} in flight, buffer {buffer})"
    )
    summary, points = await backlog.measure(
        kafka, mode, workdir, limit=limit, buffer=buffer, partitions=PARTITIONS
    )
    raw.append({"figure": "backlog", "points": points})
    return summary


async def _idle_streams(
    mode: Mode, kafka: str, mongodb: str, workdir: Path, sizes: idle_streams.Sizes | None = None
) -> dict[str, Any]:
    """Idle execution streams on one gateway, on a stack and database of their own (the other
    figures' executions must not be what the streams' gateway hears)."""
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    try:
        log("idle streams: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        chosen = sizes or idle_streams.sizes_for(mode.name)
        return await idle_streams.measure(target, chosen, mode.timeout, log)
    finally:
        target.stop()
        await target.drop()


async def _second_store(
    mode: Mode, kafka: str, uri: str, label: str | None, workdir: Path, raw: list[Any]
) -> dict[str, Any]:
    """The 1-sandbox saturation against another store (figure 7's second row)."""
    store = machine.store_of(uri, label)
    pids = {k: v for k, v in infra_pids(REPO / ".infra").items() if k == "infra:kafka"}
    pids.update(store_pids(uri))
    target = Distributed(kafka=kafka, mongodb=uri, workdir=workdir, partitions=PARTITIONS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    try:
        log(f"second store ({store['label']}): starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        await _warm_up(target)
        log(f"figure 7: saturation with 1 sandbox on {store['label']}, {mode.runs} runs")
        throughput = await figures.saturation(target, mode, pids, raw, "second-store-1")
        return {**store, "throughput": throughput}
    finally:
        target.stop()
        await target.drop()


async def _turns(
    mode: Mode, kafka: str, mongodb: str, workdir: Path, raw: list[Any]
) -> dict[str, Any]:
    """Figure 13 on a database of its own (every document of it is charged to a turn), with 1
    sandbox and the periodic sweeps out of its windows."""
    infra = infra_pids(REPO / ".infra", mongodb)
    target = Distributed(kafka=kafka, mongodb=mongodb, workdir=workdir, partitions=PARTITIONS)
    target.cluster.env.update(turns.SWEEPS_OUT_OF_THE_WINDOWS)
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    try:
        log("conversations: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        log(
            f"figure 13: {mode.turns_conversations} conversations of {turns.AGENT!r} in lock"
            f" step, {mode.turns_count} turns each"
        )
        return await turns.conversations(target, mode, infra, raw)
    finally:
        target.stop()
        await target.drop()


async def _profile(
    target: Distributed, mode: Mode, workdir: Path, saturated: float
) -> dict[str, Any]:
    """Figure 6: py-spy on every service during a saturation run (not one of the timed runs:
    sampling takes CPU from the services it watches)."""
    log(f"figure 6: profiling a saturation run for {mode.profile_seconds:g}s")
    pids = target.pids()
    client = target.client()
    # Enough work to keep the services saturated while sampling, and not much more.
    count = max(mode.saturation_count, math.ceil(saturated * (mode.profile_seconds + 3)))
    load = asyncio.create_task(
        open_loop(
            client, target.watcher(client), rate=mode.saturation_rate, count=count,
            message="bench", timeout=mode.timeout, pids=pids,
        )
    )  # fmt: skip
    try:
        await asyncio.sleep(1)  # into the steady part of the run
        files = await profile.record(pids, mode.profile_seconds, workdir / "profiles")
        await load
    finally:
        await client.aclose()
    return {
        "seconds": mode.profile_seconds,
        "processes": {name: profile.summarise(path) for name, path in files.items()},
    }


async def _embedded(mode: Mode, workdir: Path, raw: list[Any]) -> dict[str, Any]:
    """The embedded figure: its saturation offered the peers' load (``figures.saturation``)."""
    target = Embedded(workdir=workdir)
    out: dict[str, Any] = {"watcher": "changes"}
    try:
        log("embedded: starting interlock dev")
        await target.start()
        await _warm_up(target)
        log("figure 1/2: embedded saturation and latency")
        out["throughput"] = await figures.saturation(target, mode, {}, raw, "embedded")
        rate = (out["throughput"]["per_second"] or 1.0) / 2
        out["latency"] = await figures.latency(target, mode, rate, {}, raw, "embedded")
    finally:
        target.stop()
    return out


async def _peer_postgres(mongodb: str) -> dict[str, Any]:
    """The server the DBOS-on-PostgreSQL peer will run on, checked before anything is measured:
    a bench without it fails in seconds, saying why, not after the other figures."""
    server = postgres.require(postgres.server_url(mongodb))
    version = await postgres.check(server)
    log(f"peer {goals.DBOS_POSTGRES}: PostgreSQL {version} at {postgres.server_name(server)}")
    return {"server": postgres.server_name(server), "version": version}


async def measure_history(mode: Mode, *, kafka: str, mongodb: str, workdir: Path) -> dict[str, Any]:
    """Figure 8 alone (``python -m bench --history-only N``), with its settings and machine."""
    raw: list[Any] = []
    return {
        "mode": mode.name,
        "history_prefill": mode.history_prefill,
        "machine": machine.describe(REPO / ".infra"),
        "store": machine.store_of(mongodb, os.environ.get(STORE_LABEL) or None),
        "history": await _history(mode, kafka, mongodb, workdir / "history", raw),
    }


async def measure_turns(mode: Mode, *, kafka: str, mongodb: str, workdir: Path) -> dict[str, Any]:
    """Figure 13 alone (``python -m bench --turns-only``), with the machine and its date; and
    the raw windows."""
    raw: list[Any] = []
    figure = {
        "mode": mode.name,
        "machine": machine.describe(REPO / ".infra"),
        "store": machine.store_of(mongodb, os.environ.get(STORE_LABEL) or None),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **await _turns(mode, kafka, mongodb, workdir / "turns", raw),
    }
    figure["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"summary": figure, "raw": raw}


async def measure_concurrency(
    mode: Mode, *, kafka: str, mongodb: str, workdir: Path
) -> dict[str, Any]:
    """Figures 9 and 10 alone (``python -m bench --concurrency-only``), with the machine; and
    the raw samples."""
    raw: list[Any] = []
    summary = {
        "mode": mode.name,
        "mode_settings": {k: v for k, v in vars(mode).items() if k != "name"},
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "concurrency": await _concurrency(mode, kafka, mongodb, workdir / "concurrency", raw),
        "backlog": await _backlog(mode, kafka, workdir / "backlog", raw),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    return {"summary": summary, "raw": raw}


async def measure_idle_streams(
    mode: Mode, sizes: idle_streams.Sizes, *, kafka: str, mongodb: str, workdir: Path
) -> dict[str, Any]:
    """Idle streams alone (``python -m bench --idle-streams-only``), with the machine."""
    return {
        "mode": mode.name,
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "idle_streams": await _idle_streams(mode, kafka, mongodb, workdir / "streams", sizes),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


async def measure_latency(
    mode: Mode, rates: list[float], *, kafka: str, mongodb: str, workdir: Path
) -> dict[str, Any]:
    """Figure 2 alone at the given arrival rates (``python -m bench --latency-only R [R...]``),
    separate processes with 1 sandbox: the quick loop for work on the latency path."""
    infra = infra_pids(REPO / ".infra", mongodb)
    target = Distributed(
        kafka=kafka, mongodb=mongodb, workdir=workdir / "latency", partitions=PARTITIONS
    )
    await asyncio.to_thread((workdir / "latency").mkdir, parents=True, exist_ok=True)
    raw: list[Any] = []
    out: dict[str, Any] = {
        "mode": mode.name,
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "latency": {},
    }
    try:
        await target.start(sandboxes=1)
        await _warm_up(target)
        for rate in rates:
            log(f"figure 2: latency at {rate:g}/s")
            out["latency"][f"{rate:g}"] = await figures.latency(
                target, mode, rate, infra, raw, f"latency-{rate:g}"
            )
    finally:
        target.stop()
        await target.drop()
    return out


async def measure_sdk(mode: Mode, *, kafka: str, mongodb: str, workdir: Path) -> dict[str, Any]:
    """Section 12 alone (``python -m bench --sdk-only``): the ``langgraph-sdk`` workload on
    Interlock (separate processes, 1 sandbox) and on LangGraph's Agent Server; and the raw
    timings."""
    raw: list[Any] = []
    summary: dict[str, Any] = {
        "mode": mode.name,
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    target = Distributed(
        kafka=kafka, mongodb=mongodb, workdir=workdir / "sdk", partitions=PARTITIONS
    )
    await asyncio.to_thread((workdir / "sdk").mkdir, parents=True, exist_ok=True)
    try:
        log("section 12: starting gateway, orchestrator, notifier, 1 sandbox")
        await target.start(sandboxes=1)
        await _warm_up(target)
        ours = await sdk_figure.interlock(target, mode, raw, log)
    finally:
        target.stop()
        await target.drop()
    peer = await sdk_figure.agent_server_peer(mode, workdir / "agent-server", raw, log)
    summary["sdk_workload"] = sdk_figure.figure(mode, ours, peer)
    summary["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"summary": summary, "raw": raw}


EMBEDDED_TARGETS = "embedded "
"""The targets ``--embedded-only`` measures: the ones whose name starts so."""


def _same_load(mode: Mode, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Embedded and DBOS on SQLite offered the same load: the overall rate (the page's) and the
    rate over the middle 80% of completions (which a burst's completions bunching together
    raise), medians over the runs."""

    def median(figure: dict[str, Any], measure: str) -> float | None:
        return hdr.median_of(r.get(measure) for r in figure.get("runs", []))

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    figures_of = {"embedded": ours, "dbos-sqlite": theirs}
    measures = ("overall_per_second", "steady_per_second")
    out: dict[str, Any] = {
        "offered": "{:g}/s x {}".format(*figures.saturation_load(mode)),
        **{name: {m: median(f, m) for m in measures} for name, f in figures_of.items()},
    }
    for measure in measures:
        out[f"ratio_{measure}"] = ratio(out["embedded"][measure], out["dbos-sqlite"][measure])
    return out


async def measure_embedded(mode: Mode, *, mongodb: str, workdir: Path) -> dict[str, Any]:
    """The embedded figure and its DBOS-on-SQLite peer alone, in one run (``python -m bench
    --embedded-only``), and the two targets that hold one against the other; and the raw
    timings. Both latencies are measured at the same arrival rate, half of the embedded
    saturation (the whole bench measures the peer at the distributed mode's rate, which this
    run does not measure). Needs neither Kafka nor a MongoDB server (``mongodb`` is only passed
    on to the peer's command line)."""
    raw: list[Any] = []
    summary: dict[str, Any] = {
        "mode": mode.name,
        "mode_settings": {k: v for k, v in vars(mode).items() if k != "name"},
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    embedded = await _embedded(mode, workdir / "embedded", raw)
    rate = embedded["latency"]["rate_per_second"]
    log(f"figure 5: peer dbos-sqlite (latency at {rate:.2f}/s, the embedded one's rate)")
    peer = await figures.peer("dbos-sqlite", mode, rate, workdir / "peers", mongodb, raw)
    figures_out = {"embedded": embedded, "peers": {"dbos-sqlite": peer}}
    summary["figures"] = figures_out
    summary["targets"] = [
        t for t in goals.evaluate(figures_out) if t["name"].startswith(EMBEDDED_TARGETS)
    ]
    # Both offered the same load (figures.saturation_load): the steady rates and the overall.
    summary["throughput_at_the_same_load"] = _same_load(
        mode, embedded["throughput"], peer["throughput"]
    )
    summary["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"summary": summary, "raw": raw}


async def measure(mode: Mode, *, kafka: str, mongodb: str, workdir: Path) -> dict[str, Any]:
    began = time.time()
    raw: list[Any] = []
    summary: dict[str, Any] = {
        "schema": 1,
        "mode": mode.name,
        "mode_settings": {k: v for k, v in vars(mode).items() if k != "name"},
        "machine": machine.describe(REPO / ".infra"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)),
    }
    figures_out: dict[str, Any] = {}
    summary["store"] = machine.store_of(mongodb, os.environ.get(STORE_LABEL) or None)
    if mode.peers:
        summary["peer_postgresql"] = await _peer_postgres(mongodb)
    figures_out["distributed"] = await _distributed(
        mode, kafka, mongodb, workdir / "distributed", raw
    )
    figures_out["history"] = await _history(mode, kafka, mongodb, workdir / "history", raw)
    figures_out["concurrency"] = await _concurrency(
        mode, kafka, mongodb, workdir / "concurrency", raw
    )
    figures_out["backlog"] = await _backlog(mode, kafka, workdir / "backlog", raw)
    figures_out["idle_streams"] = await _idle_streams(mode, kafka, mongodb, workdir / "streams")
    figures_out["turns"] = await _turns(mode, kafka, mongodb, workdir / "turns", raw)
    second = os.environ.get(SECOND_STORE_URI)
    if second:
        label = os.environ.get(SECOND_STORE_LABEL) or None
        figures_out["second_store"] = await _second_store(
            mode, kafka, second, label, workdir / "second-store", raw
        )
    if mode.embedded:
        figures_out["embedded"] = await _embedded(mode, workdir / "embedded", raw)
    if mode.peers:
        rate = figures_out["distributed"].get("latency_rate")
        figures_out["peers"] = {}
        for kind in PEERS:
            log(f"figure 5: peer {kind}")
            figures_out["peers"][kind] = await figures.peer(
                kind, mode, rate, workdir / "peers", mongodb, raw
            )
        agent_server = await sdk_figure.agent_server_peer(mode, workdir / "agent-server", raw, log)
        ours = figures_out["distributed"].pop("sdk_workload", None)
        figures_out["sdk_workload"] = sdk_figure.figure(mode, ours, agent_server)
    summary["figures"] = figures_out
    summary["ratios"] = goals.ratios(figures_out)
    summary["targets"] = goals.evaluate(figures_out)
    summary["duration_seconds"] = round(time.time() - began, 1)
    summary["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"summary": summary, "raw": raw}


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    summary_path, raw_path = out / "summary.json", out / "raw.json"
    summary_path.write_text(json.dumps(result["summary"], indent=1, sort_keys=True) + "\n")
    raw_path.write_text(json.dumps(result["raw"]) + "\n")
    return summary_path, raw_path


def scratch(keep: bool) -> Path:
    path = Path(tempfile.mkdtemp(prefix="interlock-bench-"))
    if not keep:
        import atexit

        atexit.register(shutil.rmtree, path, True)
    return path
