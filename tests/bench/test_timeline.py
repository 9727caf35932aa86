"""bench/timeline.py's arithmetic: log lines to hops, counted from the request of their half."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.timeline import Run, hops

T0 = 1_800_000_000.0
"""The invoke request, in seconds since the epoch."""


def stamp(seconds_after: float) -> str:
    return datetime.fromtimestamp(T0 + seconds_after, UTC).isoformat().replace("+00:00", "Z")


def test_a_handled_event_starts_its_duration_before_its_line_and_halves_split_at_the_decision() -> (
    None
):
    run = Run(
        "e1", invoked=T0, suspended_seen=T0 + 0.08, decided=T0 + 1.0, completed_seen=T0 + 1.07
    )
    lines = [
        (
            "sandbox",
            {
                "execution_id": "e1",
                "event": "event.handled",
                "topic": "execution.dispatched",
                "duration_ms": 30.0,
                "timestamp": stamp(0.055),
            },
        ),
        ("gateway", {"execution_id": "e1", "event": "invoke.accepted", "timestamp": stamp(0.010)}),
        (
            "orchestrator",
            {
                "execution_id": "e1",
                "event": "event.handled",
                "topic": "decision.submitted",
                "duration_ms": 12.0,
                "timestamp": stamp(1.024),
            },
        ),
        (
            "orchestrator",
            {"execution_id": "other", "event": "event.handled", "timestamp": stamp(0.02)},
        ),
        ("notifier", {"execution_id": "e1", "event": "no timestamp"}),
    ]
    found = hops(run, lines)
    assert [(h.half, h.service, h.what) for h in found] == [
        ("invoke", "gateway", "invoke.accepted"),
        ("invoke", "sandbox", "execution.dispatched"),
        ("decision", "orchestrator", "decision.submitted"),
    ]
    sandbox, decision = found[1], found[2]
    assert round(sandbox.start_ms, 1) == 25.0 and round(sandbox.end_ms, 1) == 55.0
    assert round(decision.start_ms, 1) == 12.0 and round(decision.end_ms, 1) == 24.0
