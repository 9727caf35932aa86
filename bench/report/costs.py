"""Sections 3, 4 and 6 of the page: what a replay, an idle suspended execution and the hot path
cost."""

from __future__ import annotations

from typing import Any

from bench.report.text import ms, num

BOOT_FRAMES = frozenset({"stdlib", "asyncio", "typer", "interlock", "uvicorn", "concurrent"})
"""Packages under every sample (the process's entry point and event loop): not a cost."""


def replay_section(s: dict[str, Any]) -> list[str]:
    replay = s["figures"]["distributed"].get("replay")
    if not replay:
        return []
    lines = [
        "## 3. Replay cost",
        "",
        "N durable steps before the interrupt: on resume LangGraph re-runs the node, and the N"
        " steps come from the step cache, read in one query when the run opens (`StepRun.open`)."
        " Resume = decision -> first step after it running; replay = the node's re-run up to its"
        " interrupt, timed by the agent; bulk read = that one query, timed by the harness.",
        "",
        "| cached steps | resume (median) | replay per cached step | bulk read of the cache |",
        "| --- | --- | --- | --- |",
    ]
    for steps, r in replay.items():
        lines.append(
            f"| {steps} | {ms(r['resume_ms'])} | {num(r['replay_us_per_step'], ' us', 1)} |"
            f" {ms(r['bulk_read_ms'])} |"
        )
    return [*lines, ""]


def idle_section(s: dict[str, Any]) -> list[str]:
    idle = s["figures"]["distributed"].get("idle")
    if not idle:
        return []
    lines = [
        "## 4. Idle cost",
        "",
        f"{idle['suspended']} executions held suspended (the issue asks for 10,000: quick mode"
        " holds fewer and scales the growth to 10,000; `make bench-full` holds 10,000).",
        "",
        "| process | RSS before | RSS after | growth |",
        "| --- | --- | --- | --- |",
    ]
    for name, before in idle["rss_before_bytes"].items():
        after = idle["rss_after_bytes"].get(name)
        growth = idle["rss_growth_bytes"].get(name)
        cells = [(before or 0) / 1e6, (after or 0) / 1e6]
        lines.append(
            f"| {name} | {num(cells[0], ' MB', 1)} | {num(cells[1], ' MB', 1)}"
            f" | {num((growth or 0) / 1e6, ' MB', 2)} |"
        )
    per = idle["storage_bytes_per_suspended"]
    coll = idle["storage_after"].get("collections", {})
    lines += [
        "",
        "RSS growth of all processes, scaled linearly to 10,000 suspended:"
        f" {num(idle['rss_growth_mb_per_10k'], ' MB')}. Scaling is only indicative: only"
        " `make bench-full` (10,000 held) measures it directly; with few held, the growth also"
        " holds the buffers and caches warmed by the traffic that suspended them.",
        f"Storage per suspended execution: {num(per, ' bytes', 0)}"
        + (
            " of documents (their encoded size), and"
            f" {num(idle.get('allocated_bytes_per_suspended'), ' bytes', 0)} allocated by the"
            " store for data and indexes (`collStats`, which grows a storage page at a time)"
            if idle.get("storage_measure") == "data_bytes"
            else " (data + indexes as the store allocates them, a page at a time)"
        )
        + ". Where the bytes are after the run: "
        + ", ".join(f"{k} {v['bytes'] / 1e3:,.0f} kB" for k, v in coll.items() if v["bytes"])
        + ".",
        "",
    ]
    return lines


def profile_section(s: dict[str, Any]) -> list[str]:
    prof = s["figures"]["distributed"].get("profile")
    if not prof:
        return []
    lines = [
        "## 6. Profile of the hot path at saturation",
        "",
        f"py-spy, 100 Hz for {prof['seconds']:g} s on every process during a saturation run"
        " (not a timed run). Samples of a thread waiting (epoll, idle pool workers) are left"
        " out, so shares are of busy time."
        " Top costs by package (time on the stack) and by function (own time):",
        "",
    ]
    for name, p in prof["processes"].items():
        busy = p["samples"] / (prof["seconds"] * 100) * 100
        inclusive = ", ".join(
            f"{e['name']} {e['percent']}%"
            for e in p["inclusive_packages"]
            if e["name"] not in BOOT_FRAMES
        )
        own = ", ".join(f"`{e['name']}` {e['percent']}%" for e in p["self_functions"][:5])
        lines += [
            f"- **{name}** ({p['samples']} busy samples, ~{busy:.0f}% of one core): on the"
            f" stack: {inclusive}.",
            f"  Own time: {own}.",
        ]
    return [*lines, ""]
