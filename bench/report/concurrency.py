"""Sections 9 and 10 of the page: executions in flight per sandbox replica and which limit binds
them, and a consumer's memory under a backlog."""

from __future__ import annotations

from typing import Any

from bench.goals import flat_growth_mb
from bench.report.text import num

BUSY_SHARE = 0.85
"""A machine busier than this while the slots were in use had no CPU to spare."""


FULL_SHARE = 0.9
"""A sandbox whose typical runs in flight reach this share of its limit is at its limit."""


SLOW_SLOT = 1.5
"""Slot-seconds per execution above this multiple of the model call: the runs' own work (to
the review and after it) took long, waiting for CPU or the store, not for the model."""


UNSTEADY = 1.2
"""A rate above this multiple of what the slots admit cannot last: the run was a burst."""


def _cores_by_user(c: dict[str, Any]) -> list[tuple[str, float]]:
    """Cores used over the run by each service (its replicas together) and each of Kafka and
    the store, busiest first."""
    users: dict[str, float] = {}
    for name, cores in (c.get("cores_by_process") or {}).items():
        if cores is None:
            continue
        if name.startswith("infra:"):
            user = name.removeprefix("infra:")
        else:
            service = name.rsplit("-", 1)[0]
            user = "sandboxes" if service == "sandbox" and c["replicas"] > 1 else service
        users[user] = users.get(user, 0.0) + cores
    return sorted(users.items(), key=lambda u: -u[1])


def _admits(c: dict[str, Any]) -> tuple[float, float]:
    """(seconds each execution held a sandbox slot, executions per second the replicas' slots
    admit at that): the measured slot time, else the model call's alone."""
    slot = c.get("slot_seconds_per_execution") or c["model_ms"] / 1000
    return slot, c["replicas"] * c["limit_per_replica"] / slot


def _busy(c: dict[str, Any]) -> float | None:
    """The machine's busy share while the model calls ran, else over the whole run."""
    steady = c.get("steady_busy_share")
    return steady if steady is not None else c.get("machine_busy_share")


def _slots_full(c: dict[str, Any]) -> bool:
    typical = c.get("in_flight_per_replica_median")
    return typical is not None and typical >= FULL_SHARE * c["limit_per_replica"]


def _slow_slots(c: dict[str, Any]) -> bool:
    slot, _ = _admits(c)
    return bool(slot > SLOW_SLOT * c["model_ms"] / 1000)


def bound_by(c: dict[str, Any]) -> str | None:
    """What bound one replica count's runs:

    - ``limit``: the sandboxes' slots were full, each held about as long as the model call;
    - ``cpu``: the machine had no CPU to spare, and the slots had room or were full only
      because each run's own work was slowed (a higher limit would queue more runs on the same
      CPU);
    - ``runs``: the slots were full, held by slow runs, with CPU to spare (the runs wait on the
      store's and the broker's round trips);
    - ``elsewhere``: the slots had room and so did the CPU.

    None when not measured."""
    busy = _busy(c)
    if c.get("in_flight_per_replica_median") is None or busy is None:
        return None
    if c.get("per_second") is None:
        return None
    full, slow, cpu_short = _slots_full(c), _slow_slots(c), busy >= BUSY_SHARE
    if full and not slow:
        return "limit"
    if cpu_short:
        return "cpu"
    return "runs" if full else "elsewhere"


BOUND_NAMES = {
    "limit": "the sandbox's concurrency limit",
    "cpu": "CPU",
    "runs": "the sandbox's limit, its slots held by slow runs",
    "elsewhere": "neither the limit nor CPU",
}


def _binding(c: dict[str, Any], cores: int) -> str:
    """Which limit bound one replica count's runs, in sentences built from its numbers."""
    limit, replicas = c["limit_per_replica"], c["replicas"]
    typical, rate, busy = c.get("in_flight_per_replica_median"), c.get("per_second"), _busy(c)
    slot, admits = _admits(c)
    who = f"With {replicas} sandbox{'es' if replicas > 1 else ''}"
    bound = bound_by(c)
    if bound is None or typical is None or rate is None or busy is None:
        return f"{who}: not measured."
    held = (
        f"each execution held a slot for {slot:.2f} s, {slot * 1000 / c['model_ms']:.1f} times"
        " its model call"
    )
    ran = f"{rate:.1f} executions/s ran, where their slots admit {admits:.1f}/s"
    if rate > UNSTEADY * admits:
        ran += " (more than they admit: the run was a burst, too short to be steady)"
    ours, infra = c.get("interlock_share") or 0.0, c.get("infra_share") or 0.0
    top = ", ".join(f"{name} {used:.2f}" for name, used in _cores_by_user(c)[:4])
    machine = (
        f"the machine's {cores} cores were {busy:.0%} busy"
        + (" while the model calls ran" if c.get("steady_busy_share") is not None else "")
        + f" (over the whole run, Interlock's processes {ours:.0%}, Kafka and the store"
        f" {infra:.0%}; cores used: {top})"
    )
    if bound == "limit":
        return (
            f"{who}, the sandbox's concurrency limit binds: its {limit} slots were full"
            f" (typically {typical:g} in flight), {held}; {ran}. More replicas, or a higher"
            " `INTERLOCK_CONSUMER_CONCURRENCY`, raise it."
        )
    if bound == "cpu":
        slots = (
            f"the sandboxes' slots were full (typically {typical:g} of {limit} in flight) only"
            f" because {held}: its runs' own work waited for CPU"
            if _slots_full(c)
            else f"the sandboxes had typically {typical:g} of {limit} slots in use"
        )
        return (
            f"{who}, CPU binds, not the sandbox's limit: {machine}, and {slots}; {ran}. More"
            " slots or replicas cannot raise it; less CPU per execution, or more cores, can."
        )
    if bound == "runs":
        return (
            f"{who}, the sandbox's limit binds, but through slow runs more than the model: its"
            f" {limit} slots were full (typically {typical:g} in flight) and {held}; CPU was not"
            f" short: {machine}; {ran}. Fewer round trips per run (to the store, to the broker)"
            " would raise it as much as more slots would."
        )
    return (
        f"{who}, neither the sandbox's limit (typically {typical:g} of {limit} slots in use) nor"
        f" the CPU binds: {machine}; {ran}. The executions wait elsewhere, on the store's and"
        " the broker's round trips one after another (the orchestrator's subscriptions, held /"
        " in flight at their peak: " + _orchestrator_peaks(c) + ")."
    )


def _orchestrator_peaks(c: dict[str, Any]) -> str:
    peaks = []
    for process, consumers in (c.get("consumers") or {}).items():
        if not process.startswith("orchestrator"):
            continue
        for label, v in consumers.items():
            if v.get("held_peak"):
                topic = label.split(":", 1)[-1]
                peaks.append(f"{topic} {v['held_peak']:g} / {v['in_flight_peak']:g}")
    return ", ".join(peaks) or "none"


def replicas_name(replicas: str) -> str:
    return f"{replicas} sandbox{'es' if replicas != '1' else ''}"


def concurrency_section(s: dict[str, Any]) -> list[str]:
    conc = s["figures"].get("concurrency")
    if not conc:
        return []
    columns = list(conc.values())
    cores = s["machine"]["cores"] or 1
    lines = [
        *_concurrency_intro(s, columns[0]),
        *_concurrency_table(columns),
        "",
        "**The limit that binds.** " + " ".join(_binding(c, cores) for c in columns),
    ]
    rates = {str(c["replicas"]): c.get("per_second") for c in columns}
    if rates.get("1") and len(rates) > 1:
        most = max(columns, key=lambda c: c["replicas"])
        gain = (most.get("per_second") or 0) / rates["1"]
        lines[-1] += (
            f" {most['replicas']} sandboxes ran {gain:.2f} times the executions per second of"
            f" one, with {most['replicas']} times the slots."
        )
    return [*lines, ""]


def _concurrency_intro(s: dict[str, Any], first: dict[str, Any]) -> list[str]:
    limit, model_ms = first["limit_per_replica"], first["model_ms"]
    return [
        "## 9. Concurrency per replica",
        "",
        f"`bench-pipeline` with a model call of {model_ms / 1000:g} s (`model_ms={model_ms}`: the"
        " scripted model, awaited as a remote model's call is, so a run holds a slot without"
        f" using CPU), {first['executions_per_run']} executions per run offered at"
        f" {s['mode_settings'].get('concurrency_overload', 2):g} times what the sandboxes' limits"
        f" admit with that model time (replicas x {limit} runs in flight / {model_ms / 1000:g} s),"
        f" each approved as soon as it suspends; {len(first['runs'])} run(s) per column, median;"
        " on a database of its own. Executions in flight per sandbox replica: each sandbox's"
        ' `interlock_consumer_in_flight{consumer="sandbox:execution.dispatched"}`, scraped from'
        f" its `/metrics` every {first['scrape_seconds']:g} s; typical = the median sample while"
        " the model calls ran (from the tenth call's start to the tenth-last one's end), peak ="
        " the highest sample. Slot-seconds per execution: that gauge summed over the replicas and"
        " integrated over the run, divided by the executions (the model call, plus the work of the"
        " run to the review and of the run after it).",
        "",
    ]


def _concurrency_table(columns: list[dict[str, Any]]) -> list[str]:
    """One column per replica count."""
    limit, buffer = columns[0]["limit_per_replica"], columns[0]["buffer_per_replica"]

    def row(name: str, cell: Any) -> str:
        return f"| {name} | " + " | ".join(cell(c) for c in columns) + " |"

    return [
        "| | " + " | ".join(replicas_name(str(c["replicas"])) for c in columns) + " |",
        "| --- |" + " --- |" * len(columns),
        row("offered", lambda c: f"{c['offered_per_second']:g}/s x {c['executions_per_run']}"),
        row("full executions per second (median)", lambda c: num(c.get("per_second"))),
        row(
            f"executions in flight per sandbox replica, typical / peak (limit {limit})", _in_flight
        ),
        row(
            f"held per replica, peak (buffer {buffer})",
            lambda c: num(c.get("held_per_replica_peak"), digits=0),
        ),
        row(
            "model calls at once, peak (all replicas; from the calls' own times)",
            lambda c: num(c.get("model_calls_at_once_peak"), digits=0),
        ),
        row(
            "sandbox slot-seconds per execution",
            lambda c: num(c.get("slot_seconds_per_execution"), " s"),
        ),
        row(
            f"what the sandboxes' slots admit (replicas x {limit} / slot-seconds)",
            lambda c: f"{_admits(c)[1]:.1f}/s",
        ),
        row(
            "machine CPU busy while the model calls ran",
            lambda c: num(
                None if c.get("steady_busy_share") is None else c["steady_busy_share"] * 100, "%", 0
            ),
        ),
        row(
            "machine CPU busy, whole run (Interlock / Kafka and the store / everything else)",
            _busy_split,
        ),
        row("cores used, busiest first", _users),
        row(
            "Interlock CPU ms per execution",
            lambda c: num(c.get("cpu_ms_per_execution"), digits=1),
        ),
    ]


def _in_flight(c: dict[str, Any]) -> str:
    typical, peak = c.get("in_flight_per_replica_median"), c.get("in_flight_per_replica_peak")
    return f"{num(typical, digits=1)} / {num(peak, digits=0)}"


def _busy_split(c: dict[str, Any]) -> str:
    total, ours, infra = (
        c.get("machine_busy_share"),
        c.get("interlock_share"),
        c.get("infra_share"),
    )
    if total is None:
        return "n/a"
    other = max(total - (ours or 0) - (infra or 0), 0)
    return f"{total:.0%} ({ours or 0:.0%} / {infra or 0:.0%} / {other:.0%})"


def _users(c: dict[str, Any]) -> str:
    return ", ".join(f"{name} {used:.2f}" for name, used in _cores_by_user(c))


def backlog_section(s: dict[str, Any]) -> list[str]:
    b = s["figures"].get("backlog")
    if not b:
        return []

    def mb(value: Any) -> str:
        return "n/a" if value is None else f"{value / 1e6:,.1f} MB"

    growth = b.get("rss_growth_with_full_backlog_bytes")
    held, bound = b.get("held_peak"), b["buffer"]
    lines = [
        "## 10. Memory under a backlog",
        "",
        f"One consumer with the sandbox's limits ({b['limit']} in flight, buffer {bound}), run as"
        " the services run theirs (`shared/kafka_bus.KafkaBus` and `route`; `bench/backlog.py`),"
        f" its handler sleeping {b['handler_ms']:g} ms per message, so it is at its limit"
        f" throughout. Its topic ({b['partitions']} partitions) gets a small backlog first"
        f" ({b['small_backlog_messages']:,} small `execution.dispatched` messages; the consumer"
        " handles a few hundred of them, paying its first-use costs), then the rest up to"
        f" {b['messages']:,} (published in {b['published_seconds']:g} s), and drains for"
        f" {b['drain_seconds']:g} s. RSS of its process from `/proc`, its gauges from `/metrics`,"
        " every 0.5 s. Typical = the median sample while more was waiting than it held.",
        "",
        "| messages waiting, peak | RSS idle / small backlog / peak / end |"
        " RSS growth, small backlog -> full | held peak / typical (buffer) |"
        " in flight peak / typical (limit) | handled | left on the broker |"
        " consumer CPU per message handled, small backlog / full |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {num(b.get('backlog_peak'), digits=0)} | {mb(b.get('rss_idle_bytes'))} /"
        f" {mb(b.get('rss_small_backlog_bytes'))} / {mb(b.get('rss_peak_bytes'))} /"
        f" {mb(b.get('rss_end_bytes'))} | {mb(growth)} |"
        f" {num(held, digits=0)} / {num(b.get('held_median_while_waiting'), digits=0)}"
        f" ({bound}) | {num(b.get('in_flight_peak'), digits=0)} /"
        f" {num(b.get('in_flight_median_while_waiting'), digits=0)} ({b['limit']}) |"
        f" {num(b.get('handled'), digits=0)} | {num(b.get('left_on_the_broker'), digits=0)} |"
        f" {num(b.get('cpu_ms_per_handled_small_backlog'), ' ms', 3)} /"
        f" {num(b.get('cpu_ms_per_handled_full_backlog'), ' ms', 3)} |",
        "",
    ]
    if growth is not None and held is not None:
        flat = growth <= flat_growth_mb(b["partitions"]) * 1e6 and held <= bound
        lines += [
            (
                f"Memory stays flat: RSS moved {mb(growth)} from the small backlog"
                f" ({b['small_backlog_messages']:,} published) to the full one"
                f" ({b['messages']:,} published, {b['backlog_peak']:,} waiting at most), and the"
                f" consumer never held more than {held} messages (its bound {bound}): at the"
                " bound it took no more, aiokafka kept at most one fetched batch per"
                " partition, and the backlog waited on the broker."
                if flat
                else f"Memory is not flat: RSS grew {mb(growth)} from the small backlog"
                f" ({b['small_backlog_messages']:,} published) to the full one"
                f" ({b['messages']:,} published, {b['backlog_peak']:,} waiting at most; held"
                f" peak {held}, bound {bound})."
            ),
            "",
        ]
    return lines
