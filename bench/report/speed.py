"""Sections 1, 2 and 5 of the page: throughput at saturation, latency at half of it, and
Interlock as a ratio to each peer."""

from __future__ import annotations

from typing import Any

from bench import procstats
from bench.goals import DBOS_POSTGRES
from bench.report.text import ms, num


def _latency_rows(name: str, lat: dict[str, Any] | None) -> list[str]:
    if not lat:
        return []
    med = lat["median"]
    row = [name, f"{lat['rate_per_second']:.2f}/s x {lat['executions_per_run']}"]
    for key in ("invoke_to_suspended", "decision_to_next_step", "decision_to_completed"):
        v = med[key]
        row.append(f"{ms(v.get('p50_ms'))} / {ms(v.get('p99_ms'))} / {ms(v.get('p99_9_ms'))}")
    return ["| " + " | ".join(row) + " |"]


def throughput_section(s: dict[str, Any]) -> list[str]:
    f = s["figures"]
    lines = [
        "## 1. Throughput at saturation",
        "",
        "Full HITL executions (invoke, 3 steps, suspend, approve, 2 steps, completed) per second,"
        " every system offered the same burst well above its capacity; the rate is the"
        " completions over the time from the first arrival to the last completion.",
        "",
        "| system | executions/s (median) | runs | CPU ms per execution (Interlock processes) |",
        "| --- | --- | --- | --- |",
    ]
    for replicas, t in (f["distributed"].get("throughput") or {}).items():
        lines.append(
            f"| Interlock, separate processes, {replicas} sandbox(es) | {num(t['per_second'])}"
            f" | {len(t['runs'])} | {num(t['cpu_ms_per_execution'], digits=1)} |"
        )
    emb = f.get("embedded", {}).get("throughput")
    if emb:
        lines.append(
            f"| Interlock embedded (`interlock dev`) | {num(emb['per_second'])} |"
            f" {len(emb['runs'])} | {num(emb['cpu_ms_per_execution'], digits=1)} |"
        )
    for kind, p in (f.get("peers") or {}).items():
        t = p["throughput"]
        lines.append(
            f"| peer: {kind} | {num(t['per_second'])} | {len(t['runs'])} | {peer_cpu(t)} |"
        )
    runs = f["distributed"].get("throughput", {}).get("1", {}).get("runs", [])
    if runs:
        cpu = runs[0]["cpu"]
        infra = {k: v for k, v in cpu["per_process_seconds"].items() if k.startswith("infra:")}
        lines += [
            "",
            f"In the first 1-sandbox run, Interlock's processes used {cpu['measured_seconds']} CPU"
            f" seconds, Kafka and the store {infra}, and the whole machine"
            f" {cpu['machine_busy_seconds']} (of {runs[0].get('makespan_seconds')} s elapsed on"
            f" {s['machine']['cores']} cores).",
        ]
    lines += peer_database_cpu(f.get("peers") or {})
    return [*lines, ""]


def peer_cpu(t: dict[str, Any]) -> str:
    """A peer's CPU per execution: its own process's, and its database server's apart when it
    runs on one here (the peer is charged only its own, as Interlock is)."""
    own = f"{num(t['cpu_ms_per_execution'], digits=1)} (peer process)"
    server = t.get("store_cpu_ms_per_execution")
    return own if server is None else f"{own}; {num(server, digits=1)} (its database server)"


SERVER_NAMES = {procstats.POSTGRESQL: "PostgreSQL", procstats.FERRETDB: "FerretDB"}


def peer_database_cpu(peers: dict[str, Any]) -> list[str]:
    """For each peer whose database server runs on this machine, where the CPU of its first
    saturation run went."""
    lines = []
    for kind, p in peers.items():
        runs = p["throughput"].get("runs") or []
        cpu = runs[0].get("cpu") if runs else None
        if not cpu:
            continue
        shared = ", ".join(
            f"{SERVER_NAMES.get(name, name.removeprefix('infra:'))} {seconds}"
            for name, seconds in cpu["per_process_seconds"].items()
            if name.startswith("infra:")
        )
        if not shared:
            continue
        lines.append(
            f"In the first {kind} run, the peer's process used {cpu['measured_seconds']} CPU"
            f" seconds, {shared} (the database server's postmaster with all its backends:"
            " whatever else the server did meanwhile counts too, none of it the benchmark's),"
            f" and the whole machine {cpu.get('machine_busy_seconds', 'n/a')} (of"
            f" {runs[0].get('makespan_seconds')} s elapsed)."
        )
    return ["", *lines] if lines else []


def latency_section(s: dict[str, Any]) -> list[str]:
    f = s["figures"]
    lines = [
        "## 2. Latency at 50% of saturation",
        "",
        "p50 / p99 / p99.9, median over runs. With few executions per run (quick mode) p99 and"
        " p99.9 are the slowest few samples, not a tail estimate.",
        "",
        "| system | offered | invoke -> suspended | decision -> next step running |"
        " decision -> completed |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += _latency_rows("Interlock, separate processes", f["distributed"].get("latency"))
    lines += _latency_rows("Interlock embedded", f.get("embedded", {}).get("latency"))
    for kind, p in (f.get("peers") or {}).items():
        lines += _latency_rows(f"peer: {kind}", p.get("latency"))
    low = f["distributed"].get("latency_low")
    if low:
        lines += [
            "",
            "At 10% of saturation (the same measures; an execution waits for nothing but its own"
            " round trips):",
            "",
            *lines[4:6],
            *_latency_rows("Interlock, separate processes", low),
        ]
    return [*lines, ""]


def ratios_section(s: dict[str, Any]) -> list[str]:
    if not s.get("ratios"):
        return []
    lines = [
        "## 5. Interlock as a ratio to each peer",
        "",
        "Interlock separate processes, 1 sandbox, divided by the peer (throughput: above 1 is"
        " faster; latency and CPU: above 1 is slower / costlier). The peers run the same shape"
        " in one process: LangGraph with the same graph and checkpointer kind (MongoDB saver on"
        " the same FerretDB, and the SQLite saver), resumed with `Command(resume=...)`, durable"
        " steps being plain calls there (the floor: no bus, no services, no step cache); DBOS"
        " Transact with `@DBOS.step`s, `DBOS.set_event` to announce the wait, `DBOS.recv` /"
        " `DBOS.send` for the decision, on its SQLite system database, polling every 10 ms"
        " (its default is 1 s; SQLite has no notifications)"
        + _dbos_postgres_note(s)
        + ". Peers' latencies are measured at Interlock's latency rate. The peers' CPU per"
        " execution is their own process's, as Interlock's is its processes' (database servers"
        " apart, section 1).",
        "",
        "| peer | throughput | CPU per execution | invoke -> suspended p50 |"
        " decision -> next step p50 | decision -> completed p50 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind, r in s["ratios"].items():
        cells = [
            r["throughput"],
            r["cpu_per_execution"],
            r["invoke_to_suspended_p50"],
            r["decision_to_next_step_p50"],
            r["decision_to_completed_p50"],
        ]
        lines.append(f"| {kind} | " + " | ".join(num(c, "x") for c in cells) + " |")
    return [*lines, ""]


def _dbos_postgres_note(s: dict[str, Any]) -> str:
    """How DBOS ran on PostgreSQL, when it did in this run."""
    if DBOS_POSTGRES not in s.get("ratios", {}):
        return "; DBOS on PostgreSQL was not run"
    return (
        f", and on PostgreSQL (`{DBOS_POSTGRES}`), its system database in a database of its own"
        " (DBOS 3 has no application database) on the server named under the conditions above,"
        " created for each run and dropped after, with DBOS's defaults there (LISTEN/NOTIFY"
        " wakes `recv` and `get_event`; no knob turned)"
    )
