"""From one run's records to its figures (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from bench import hdr


class Timed(Protocol):
    scheduled_at: float
    suspended_at: float | None
    decided_at: float | None
    completed_at: float | None
    resumed_at: float | None
    status: str | None


def throughput(executions: Sequence[Timed]) -> dict[str, Any]:
    """Completions per second. ``steady`` counts only the middle 80% of completions, so the
    pipeline filling at the start and draining at the end do not dilute the saturated rate."""
    done = sorted(e.completed_at for e in executions if e.status == "completed" and e.completed_at)
    out: dict[str, Any] = {"completed": len(done), "offered": len(executions)}
    if not done:
        return out
    first_due = min(e.scheduled_at for e in executions)
    out["makespan_seconds"] = round(done[-1] - first_due, 3)
    out["overall_per_second"] = round(len(done) / max(done[-1] - first_due, 1e-9), 3)
    low, high = len(done) // 10, len(done) - 1 - len(done) // 10
    if high - low >= 2 and done[high] > done[low]:
        out["steady_per_second"] = round((high - low) / (done[high] - done[low]), 3)
    return out


LATENCIES = {
    "invoke_to_suspended": ("scheduled_at", "suspended_at"),
    "decision_to_next_step": ("decided_at", "resumed_at"),
    "decision_to_completed": ("decided_at", "completed_at"),
}


def latencies(executions: Sequence[Timed]) -> tuple[dict[str, Any], dict[str, str]]:
    """The three latencies of the results page, summarised and HDR-encoded."""
    summaries: dict[str, Any] = {}
    encoded: dict[str, str] = {}
    for name, (start, end) in LATENCIES.items():
        histogram = hdr.new_histogram()
        for e in executions:
            if e.status != "completed":
                continue
            began, ended = getattr(e, start), getattr(e, end)
            if began is not None and ended is not None:
                hdr.record_seconds(histogram, ended - began)
        summaries[name] = hdr.summary(histogram)
        encoded[name] = hdr.encoded(histogram)
    return summaries, encoded


def cpu_per_execution(
    cpu: dict[str, Any], completed: int, processes: Sequence[str] | None = None
) -> float | None:
    """Milliseconds of CPU per completed execution: of the measured processes (Interlock's), or
    of the named ``processes`` (the store's), None when none of them was measured."""
    if not completed:
        return None
    if processes is None:
        if "measured_seconds" not in cpu:
            return None
        return round(float(cpu["measured_seconds"]) * 1000 / completed, 3)
    seconds = [v for k, v in cpu.get("per_process_seconds", {}).items() if k in processes]
    return round(sum(seconds) * 1000 / completed, 3) if seconds else None


def median_throughput(runs: Sequence[dict[str, Any]], key: str) -> float | None:
    return hdr.median_of(r.get(key) for r in runs)
