"""Section 13 of the page: one turn of a conversation as the conversation grows (figure 13,
bench/turns.py)."""

from __future__ import annotations

from typing import Any

from bench.report.text import ms, num

SERVICES = ("gateway", "orchestrator", "sandbox", "checkpointer")


def _bytes(value: Any) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _ratio(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _when(fig: dict[str, Any], s: dict[str, Any]) -> str:
    """Where and when the figure was measured, when not in the page's own run."""
    if not fig.get("started_at") or fig.get("started_at") == s.get("started_at"):
        return "in this run"
    m = fig.get("machine") or {}
    load = fig.get("load_average_at_end")
    return (
        f"by `python -m bench --turns-only` ({fig.get('mode')} mode), started"
        f" {fig['started_at']}, apart from the rest of this page, on {m.get('cores')} cores"
        f" ({m.get('cpu')}), {m.get('memory_gib')} GiB, Linux {m.get('kernel')}, Python"
        f" {m.get('python')}, Kafka {m.get('kafka')}, {(fig.get('store') or {}).get('label')}"
        + (f"; load average {load} at its end" if load else "")
    )


def _row(name: str, r: dict[str, Any]) -> str:
    by = r["by_service"]
    split = " / ".join(num(by.get(service, 0), digits=1) for service in SERVICES)
    lat = r["latency_ms"]
    return (
        f"| {name} | **{num(r['commands'], digits=1)}** ({split}) | {ms(r['command_ms'])} |"
        f" {ms(lat['p50'])} ({ms(lat['min'])} - {ms(lat['max'])}) | {num(r['cpu_ms'], digits=1)}"
        f" | {num(r['store_cpu_ms'], digits=1)} | {_bytes(r['checkpoint_bytes'])} |"
        f" {_bytes(r['state_bytes'])} | {_bytes(r['stored_bytes'])} |"
    )


RATIO_COLUMNS = (
    "commands",
    "command_ms",
    "latency_ms",
    "cpu_ms",
    "store_cpu_ms",
    "checkpoint_bytes",
    "state_bytes",
    "stored_bytes",
)
"""The growth figures in the table's column order."""


def _ratio_row(name: str, g: dict[str, Any]) -> str:
    return f"| {name} | " + " | ".join(_ratio(g[k].get("ratio")) for k in RATIO_COLUMNS) + " |"


def _slopes(g: dict[str, Any]) -> str:
    def one(key: str, unit: str, digits: int = 1) -> str:
        value = g[key].get("slope_per_turn")
        return "n/a" if value is None else f"{value:+,.{digits}f}{unit}"

    return (
        f"store commands {one('commands', '', 2)}, time in them {one('command_ms', ' ms')},"
        f" request -> completed {one('latency_ms', ' ms')}, Interlock CPU {one('cpu_ms', ' ms')},"
        f" store CPU {one('store_cpu_ms', ' ms')}, checkpoint bytes"
        f" {one('checkpoint_bytes', '', 0)}, all bytes stored {one('stored_bytes', '', 0)}"
    )


def _changed(rows: list[list[Any]]) -> str:
    if not rows:
        return "none"
    return ", ".join(
        f"{s} {c} {cmd} {num(a, digits=0)} -> {num(b, digits=0)}" for s, c, cmd, a, b in rows
    )


def _time_growth(first: dict[str, Any], last: dict[str, Any], top: int = 5) -> str:
    """The commands whose time per turn grew most from the first turn to the last."""
    before = {tuple(r[:3]): r[3] for r in first["command_ms_rows"]}
    after = {tuple(r[:3]): r[3] for r in last["command_ms_rows"]}
    grown = sorted(
        ((after.get(k, 0.0) - before.get(k, 0.0), k) for k in after.keys() | before.keys()),
        reverse=True,
    )[:top]
    return ", ".join(
        f"{s} {c} {cmd} {num(before.get((s, c, cmd), 0.0), digits=1)} ->"
        f" {num(after.get((s, c, cmd), 0.0), digits=1)} ms"
        for delta, (s, c, cmd) in grown
        if delta > 0
    )


PAIRED_COLUMNS = (
    "latency_ms_p50",
    "commands_p50",
    "command_ms_p50",
    "cpu_ms_p50",
    "store_cpu_ms_p50",
)


def _paired_row(name: str, k: dict[str, Any]) -> str:
    return (
        f"| {name} | {k['requests']} | {ms(k['latency_ms_p50'])} |"
        f" {num(k['commands_p50'], digits=1)} | {ms(k['command_ms_p50'])} |"
        f" {num(k['cpu_ms_p50'], digits=1)} | {num(k['store_cpu_ms_p50'], digits=1)} |"
    )


def _paired(p: dict[str, Any] | None) -> list[str]:
    if not p or not p["later"]["requests"]:
        return []
    later = p["later"]
    low, high = later["turns"]
    span = f"{low}" if low == high else f"{low} - {high}"
    return [
        f"Paired: {p['rounds']} rounds of three requests one at a time (a new conversation's"
        " first turn and its second, and a long conversation's next turn; the long one first in"
        " every other round), so every kind of turn meets the same machine, and the step from a"
        " conversation's first turn to its second is told apart from growth. Medians per"
        " request:",
        "",
        "| turn | requests | request -> completed | store commands | time in store commands |"
        " Interlock CPU ms | store CPU ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        _paired_row("1 (new conversations)", p["first"]),
        _paired_row("2 (the same)", p["second"]),
        _paired_row(f"{span} (the long ones)", later),
        *(
            f"| {span} / {name} | | "
            + " | ".join(_ratio(p[f"later_vs_{base}"][k]) for k in PAIRED_COLUMNS)
            + " |"
            for base, name in (("first", "turn 1"), ("second", "turn 2"))
        ),
        "",
        f"Time in store commands by command, turn 2 -> {span} (medians; the"
        f" largest changes): {_command_time_growth(p['second'], later)}.",
        "",
    ]


def _command_time_growth(before: dict[str, Any], after: dict[str, Any], top: int = 6) -> str:
    a, b = before["command_ms_by_command_p50"], after["command_ms_by_command_p50"]
    grown = sorted(((b.get(k, 0.0) - a.get(k, 0.0), k) for k in a.keys() | b.keys()), reverse=True)
    return (
        ", ".join(
            f"{k} {num(a.get(k, 0.0), digits=1)} -> {num(b.get(k, 0.0), digits=1)} ms"
            for delta, k in grown[:top]
            if delta > 0
        )
        or "none"
    )


def turns_section(s: dict[str, Any]) -> list[str]:
    fig = s["figures"].get("turns")
    if not fig or not fig.get("per_turn"):
        return []
    rows = {r["turn"]: r for r in fig["per_turn"]}
    first, last = rows[min(rows)], rows[max(rows)]
    g = fig["growth"]
    busy = sorted(r["machine_busy_share"] for r in rows.values() if r.get("machine_busy_share"))
    periodic = sum(1 for r in rows.values() if r.get("periodic_commands"))
    lines = [
        "## 13. A conversation's turns",
        "",
        f"{fig['conversations']} conversations of the `{fig.get('agent', 'conversation')}` agent"
        " (`agents/conversation.py`: LangGraph's `MessagesState` chat, no model; each reply quotes"
        " every earlier message, so the state grows a little faster than the messages) driven in"
        f" lock step to {fig['turns']} turns each through the native API (`POST .../invoke` with"
        " a `session_id`), measured"
        f" {_when(fig, s)}. Turn k of every conversation is sent at once and followed to its end on"
        " `execution.status`; then every process's store commands (section 7's counters) and the"
        " time it spent in them (the driver's timing, round trip included) are read once settled,"
        " and divided by the conversations. Bytes: every document of the figure's own database,"
        " read back after the run and charged to the turn whose execution it names (BSON size):"
        " the checkpoint thread's (its head and the checkpoints it archived), the serialized state"
        " in its head, and all collections. The periodic sweeps run hourly (the notifier's"
        f" delivery poll each minute; it fell in {periodic} window(s), counted apart).",
        "",
        "| turn | store commands (gateway / orchestrator / sandbox / checkpointer) | time in store"
        " commands | request -> completed p50 (fastest - slowest) | Interlock CPU ms | store CPU"
        " ms | checkpoint bytes stored | state bytes | all bytes stored |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(_row(str(t), rows[t]) for t in fig["reported_turns"] if t in rows),
        _ratio_row(f"turn {last['turn']} / turn {first['turn']}", g),
    ]
    from_2 = fig.get("growth_from_turn_2")
    if from_2:
        lines.append(_ratio_row(f"turn {last['turn']} / turn 2", from_2))
    lines += [
        "",
        f"Per turn after the first, least squares over turns 2 to {last['turn']}: {_slopes(g)}."
        + (
            f" The machine's cores were {busy[len(busy) // 2]:.0%} busy (median over the windows;"
            f" {busy[0]:.0%} to {busy[-1]:.0%}), other users' work included."
            if busy
            else ""
        ),
        "",
        f"Commands whose count differs, turn {first['turn']} -> {last['turn']}:"
        f" {_changed(fig.get('changed_commands') or [])}; turn 2 -> {last['turn']}:"
        f" {_changed(fig.get('changed_commands_from_turn_2') or [])}. Time in store commands grew"
        f" most in: {_time_growth(first, last) or 'none'}. Bytes stored by turn {last['turn']}, by"
        " collection: "
        + ", ".join(f"{k} {_bytes(v)}" for k, v in last["stored_bytes_by_collection"].items())
        + ".",
        "",
        *_paired(fig.get("paired")),
    ]
    return [*lines, ""]
