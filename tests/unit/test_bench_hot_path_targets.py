"""Issue 20's targets that the standing figures measure (bench/goals.py): each computed from
the figures it names, met or missed by the factor shown, and not measured when one is missing."""

from __future__ import annotations

from typing import Any

from bench import goals


def by_name(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in goals.evaluate(figures)}


FIGURES: dict[str, Any] = {
    "distributed": {
        "throughput": {
            "1": {"per_second": 20.0, "cpu_ms_per_execution": 45.0},
            "3": {"per_second": 25.0},
        },
        "latency": {"median": {"decision_to_next_step": {"p50_ms": 45.0}}},
        "latency_low": {
            "median": {
                "decision_to_next_step": {"p50_ms": 30.0, "p99_ms": 50.0},
                "invoke_to_suspended": {"p50_ms": 60.0},
            }
        },
    },
    "embedded": {
        "throughput": {"per_second": 10.0},
        "latency": {"median": {"decision_to_next_step": {"p50_ms": 12.0}}},
    },
    "peers": {
        "dbos-sqlite": {
            "throughput": {"per_second": 40.0},
            "latency": {"median": {"decision_to_next_step": {"p50_ms": 15.0}}},
        }
    },
}


def test_each_target_is_met_or_missed_by_what_it_measures() -> None:
    targets = by_name(FIGURES)
    cpu = targets["Interlock's own CPU per execution (1 sandbox, saturation)"]
    assert (cpu["measured"], cpu["met"], cpu["off_by"]) == (45.0, False, 1.5)
    sandboxes = targets["3 sandboxes vs 1 (throughput)"]
    assert (sandboxes["measured"], sandboxes["met"]) == (1.25, True)
    embedded = targets["embedded throughput vs DBOS on SQLite (same run)"]
    assert (embedded["measured"], embedded["met"], embedded["off_by"]) == (0.25, False, 4.0)
    latency = targets["embedded decision -> next step p50 vs DBOS on SQLite"]
    assert (latency["measured"], latency["met"]) == (0.8, True)


def test_latency_targets_read_the_load_they_name() -> None:
    targets = by_name(FIGURES)
    low_p50 = targets["decision -> next step p50 at 10% of saturation"]
    assert (low_p50["measured"], low_p50["met"], low_p50["off_by"]) == (30.0, False, 2.0)
    low_p99 = targets["decision -> next step p99 at 10% of saturation"]
    assert (low_p99["measured"], low_p99["met"]) == (50.0, True)
    invoke = targets["invoke -> suspended p50 at 10% of saturation"]
    assert (invoke["measured"], invoke["met"], invoke["off_by"]) == (60.0, False, 1.5)
    half = targets["decision -> next step p50 at 50% of saturation"]
    assert (half["measured"], half["met"]) == (45.0, True)


def test_a_target_whose_figure_is_missing_is_not_measured() -> None:
    targets = by_name({"distributed": {"throughput": {"1": {"per_second": 20.0}}}})
    for name in (
        "Interlock's own CPU per execution (1 sandbox, saturation)",
        "3 sandboxes vs 1 (throughput)",
        "embedded throughput vs DBOS on SQLite (same run)",
        "decision -> next step p50 at 10% of saturation",
        "invoke -> suspended p50 at 10% of saturation",
        "decision -> next step p50 at 50% of saturation",
    ):
        assert targets[name]["measured"] is None and targets[name]["met"] is None


def test_low_load_is_held_to_half_load_by_its_worst_latency_figure() -> None:
    dist = {
        "latency": {
            "median": {
                "invoke_to_suspended": {"p50_ms": 50.0, "p99_ms": 80.0},
                "decision_to_next_step": {"p50_ms": 40.0, "p99_ms": 60.0},
            }
        },
        "latency_low": {
            "median": {
                "invoke_to_suspended": {"p50_ms": 45.0, "p99_ms": 88.0},
                "decision_to_next_step": {"p50_ms": 30.0, "p99_ms": 50.0},
            }
        },
    }
    targets = by_name({"distributed": dist})
    worst = targets["every latency p50 / p99 at 10% of saturation vs at half (the worst)"]
    assert (worst["measured"], worst["met"], worst["off_by"]) == (1.1, False, 1.1)
    assert goals.worst_low_load_ratio({}) is None


def test_issue_35_halves_the_cpu_per_execution() -> None:
    cpu = by_name(FIGURES)["Interlock's own CPU per execution, half of issue 35's 66 ms"]
    assert (cpu["measured"], cpu["met"], cpu["off_by"]) == (45.0, False, 1.36)
