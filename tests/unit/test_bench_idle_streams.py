"""The idle-streams figure's arithmetic (share of a core, per-stream cost and memory), how its
streams are spread over keys and executions, and how it reaches the targets table and the page."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench import goals
from bench.idle_streams import (
    GatewayStreamSettings,
    Rss,
    Sizes,
    Window,
    assignment,
    core_percent,
    keys_needed,
    sizes_for,
    summarise,
)
from bench.report import page
from bench.report.idle_streams import idle_streams_section

CLOCK_TICKS_PER_SECOND = 100
SETTINGS = GatewayStreamSettings(max_per_key=20, key_check_seconds=5.0, max_seconds=900.0)


def test_a_core_share_is_cpu_over_wall_clock() -> None:
    ticks = 150  # utime + stime moved by this many ticks over the window
    assert core_percent(ticks / CLOCK_TICKS_PER_SECOND, 30) == 5.0
    assert core_percent(0.3, 60) == 0.5
    assert core_percent(0, 10) == 0.0


def test_a_window_that_did_not_last_is_refused() -> None:
    with pytest.raises(ValueError):
        core_percent(1.0, 0)


def test_keys_are_as_many_as_the_per_key_cap_takes() -> None:
    assert keys_needed(1_000, 20) == 50
    assert keys_needed(1_001, 20) == 51
    assert keys_needed(6, 20) == 1


def test_no_key_holds_more_streams_than_its_cap_and_every_execution_is_watched() -> None:
    plan = assignment(1_000, 50, 20)
    per_key = Counter(key for _, key in plan)
    assert len(plan) == 1_000
    assert max(per_key.values()) == 20
    assert len(per_key) == 50
    assert {execution for execution, _ in plan} == set(range(50))
    for key in per_key:  # a key's streams watch different executions
        watched = [execution for execution, k in plan if k == key]
        assert len(set(watched)) == len(watched)


def test_sizes_follow_the_mode_unless_overridden() -> None:
    assert sizes_for("quick") == Sizes(1_000, 50, 30, 15)
    smaller = sizes_for("quick", streams=10, seconds=20)
    assert (smaller.streams, smaller.executions, smaller.seconds) == (10, 10, 20)
    assert smaller.baseline_seconds == 10  # the baseline keeps its half of the window
    with pytest.raises(ValueError):
        sizes_for("smoke", seconds=0)


def _window(seconds: float, cpu: float, commands: int = 0) -> Window:
    counts = {("gateway-0", "api_keys", "find"): commands} if commands else {}
    return Window(seconds, cpu, 0.2, seconds * 1.1, counts)


def _figure(streams_open: int = 1_000) -> dict[str, Any]:
    return summarise(
        Sizes(1_000, 50, 30, 15),
        SETTINGS,
        keys=50,
        suspended=50,
        open_seconds=4.2,
        streams_open=streams_open,
        late_events=0,
        keepalives=1_333,
        baseline=_window(15, 0.15),
        loaded=_window(30, 0.6, commands=300),
        rss=Rss(before=100_000_000, open=110_240_000, closed=109_000_000),
        failures=[],
    )


def test_the_figure_counts_the_gateway_and_what_the_streams_add() -> None:
    figure = _figure()
    assert figure["gateway_core_percent"] == 2.0
    assert figure["baseline"]["gateway_core_percent"] == 1.0
    # 0.6 s used, 0.3 s of it at the baseline's rate: 0.3 s over 1,000 streams and 30 s.
    assert figure["gateway_cpu_us_per_stream_second"] == 10.0
    assert figure["store_commands"]["total"] == 300
    assert figure["store_commands"]["per_second"] == 10.0
    assert figure["rss_growth_bytes"] == 10_240_000
    assert figure["rss_growth_kb_per_stream"] == 10.0


def test_the_target_row_is_the_gateway_share_of_a_core() -> None:
    (target,) = goals.evaluate({"idle_streams": _figure()})[-1:]
    assert target["name"] == "1,000 idle execution streams on one gateway: CPU"
    assert target["goal"] == "< 5% of one core"
    assert (target["measured"], target["met"], target["off_by"]) == (2.0, True, None)


def test_a_share_over_the_goal_is_missed_by_its_factor() -> None:
    figure = {**_figure(), "gateway_core_percent": 7.5}
    (target,) = goals.evaluate({"idle_streams": figure})[-1:]
    assert (target["met"], target["off_by"]) == (False, 1.5)


def test_a_window_with_streams_missing_does_not_measure_the_target() -> None:
    (target,) = goals.evaluate({"idle_streams": _figure(streams_open=990)})[-1:]
    assert target["measured"] is None and target["met"] is None


def test_without_the_figure_there_is_no_row() -> None:
    names = [t["name"] for t in goals.evaluate({})]
    assert not any("idle execution streams" in name for name in names)


def test_the_page_has_the_section_and_the_row() -> None:
    figure = _figure()
    text = "\n".join(idle_streams_section(figure))
    assert text.startswith("## 11. Idle streams")
    assert "| 1,000 streams open, idle | 30.0 s | 0.60 s | 2.00% | 300 (10.00/s) |" in text
    assert "| no stream open (baseline) | 15.0 s | 0.15 s | 1.00% | 0 (0.00/s) |" in text
    assert "10.0 us of CPU per second" in text
    assert "10.2 MB, 10.00 KB per stream" in text
    assert "300 find on api_keys" in text
    assert "during the window: 0 (keep-alive comments: 1,333)" in text
    rows = page.targets_section({"targets": goals.evaluate({"idle_streams": figure})})
    assert (
        "| 1,000 idle execution streams on one gateway: CPU | < 5% of one core | 2.00 | yes |  |"
        in rows
    )


def test_a_summary_without_the_figure_renders_no_section() -> None:
    assert idle_streams_section(None) == []


def test_a_window_below_the_baseline_reads_as_nothing_measurable() -> None:
    figure = {**_figure(), "gateway_cpu_us_per_stream_second": -3.1}
    text = "\n".join(idle_streams_section(figure))
    assert "-3.1" not in text
    assert "no CPU measurable" in text
