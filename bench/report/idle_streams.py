"""Section 11 of the page: what idle execution streams cost one gateway."""

from __future__ import annotations

from typing import Any

from bench.report.text import num


def streams_section(s: dict[str, Any]) -> list[str]:
    """Section 11 of a summary."""
    return idle_streams_section(s["figures"].get("idle_streams"))


def idle_streams_section(f: dict[str, Any] | None) -> list[str]:
    """Section 11 from the idle-streams figure (also what ``--idle-streams-only`` wrote)."""
    if not f:
        return []

    def mb(value: Any) -> str:
        return "n/a" if value is None else f"{value / 1e6:,.1f} MB"

    def row(name: str, w: dict[str, Any]) -> str:
        counted = w["store_commands"]
        return (
            f"| {name} | {w['seconds']:,.1f} s | {w['gateway_cpu_seconds']:,.2f} s |"
            f" {w['gateway_core_percent']:,.2f}% | {counted['total']:,}"
            f" ({counted['per_second']:,.2f}/s) | {w['harness_cpu_seconds']:,.2f} s |"
            f" {w['machine_busy_seconds']:,.2f} s |"
        )

    measured = {
        "seconds": f["window_seconds"],
        "gateway_cpu_seconds": f["gateway_cpu_seconds"],
        "gateway_core_percent": f["gateway_core_percent"],
        "store_commands": f["store_commands"],
        "harness_cpu_seconds": f["harness_cpu_seconds"],
        "machine_busy_seconds": f["machine_busy_seconds"],
    }
    added = f.get("gateway_cpu_us_per_stream_second")
    per_stream = (
        f"{num(added, ' us', 1)} of CPU per second"
        if added is None or added > 0
        else "no CPU measurable (the window used no more than the baseline's rate)"
    )
    rows = f["store_commands"]["rows"]
    commands = ", ".join(f"{n} {cmd} on {coll}" for _, coll, cmd, n in rows) or "none"
    lines = [
        "## 11. Idle streams",
        "",
        f"{f['streams_open']:,} execution streams (of {f['streams']:,} asked) held open on one"
        f" gateway, watching {f['executions']:,} suspended executions with {f['keys']:,} API"
        f" key(s) (a key may hold {f['max_per_key']} streams per gateway process), each past"
        f" its first events (the trail and the `interrupt`; opening them all took"
        f" {f['open_seconds']:g} s) and past its first key re-check (every"
        f" {f['key_check_seconds']:g} s). Then the gateway process's CPU, read from `/proc`, over"
        " a window with nothing else asked of the services; the harness holds the other end of"
        " the connections and its CPU is shown apart, never counted. The baseline is the same"
        " gateway just before, with no stream open. Store commands are the gateway's own, from"
        " its `/metrics`.",
        "",
        "| gateway | window | gateway CPU | share of one core | gateway store commands |"
        " harness CPU | machine busy (all cores) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        row("no stream open (baseline)", f["baseline"]),
        row(f"{f['streams_open']:,} streams open, idle", measured),
        "",
        f"Above the baseline, one idle stream costs the gateway {per_stream}. Its"
        f" RSS went from {mb(f.get('rss_before_bytes'))} before the streams to"
        f" {mb(f.get('rss_open_bytes'))} with them open"
        f" ({mb(f.get('rss_growth_bytes'))}, {num(f.get('rss_growth_kb_per_stream'), ' KB')}"
        f" per stream), and was {mb(f.get('rss_closed_bytes'))} once they closed. Events sent"
        f" during the window: {f['events_during_window']} (keep-alive comments:"
        f" {num(f.get('keepalives_during_window'), digits=0)}). The window's store commands:"
        f" {commands}.",
        "",
    ]
    if f.get("failed"):
        lines += [f"{f['failed']} stream(s) failed: {'; '.join(f['failures'])}.", ""]
    return lines
