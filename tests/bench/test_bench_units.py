"""The harness's store measurements without infrastructure: counting commands from /metrics,
copying an execution's documents for the history figure, finding the store's processes, and a
conversation's costs per turn."""

from __future__ import annotations

import os
import uuid

import bson
import pytest
from bson import Binary, ObjectId
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench import procstats
from bench.commands import (
    Breakdown,
    as_rows,
    diff,
    diff_seconds,
    from_rows,
    parse,
    parse_seconds,
    per_execution,
)
from bench.prefill import copies, replaced
from bench.turn_costs import (
    Paired,
    Sent,
    Window,
    document_bytes,
    growth,
    owner_of,
    slope,
    split_periodic,
    summarise,
)


def _exposition(observations: list[tuple[str, str]]) -> str:
    registry = CollectorRegistry()
    histogram = Histogram(
        "interlock_store_command_seconds", "x", ["command", "collection"], registry=registry
    )
    for command, collection in observations:
        histogram.labels(command, collection).observe(0.001)
    return generate_latest(registry).decode()


def test_counts_are_the_histograms_counts_per_process_collection_and_command() -> None:
    text = _exposition([("find", "steps"), ("find", "steps"), ("insert", "checkpoints")])
    assert parse(text, "sandbox-0") == {
        ("sandbox-0", "steps", "find"): 2,
        ("sandbox-0", "checkpoints", "insert"): 1,
    }


def test_a_difference_keeps_what_moved_and_refuses_a_restart() -> None:
    before = {("gateway-0", "api_keys", "find"): 3, ("sandbox-0", "steps", "find"): 1}
    after = {("gateway-0", "api_keys", "find"): 5, ("sandbox-0", "steps", "find"): 1}
    assert diff(after, before) == {("gateway-0", "api_keys", "find"): 2}
    with pytest.raises(ValueError, match="restart"):
        diff(before, after)


def test_the_breakdown_tells_the_checkpointer_from_the_sandbox() -> None:
    counts = {
        ("sandbox-0", "attempts", "find"): 4,
        ("sandbox-1", "checkpoint_heads", "find"): 3,
        ("sandbox-0", "checkpoints", "update"): 2,
        ("orchestrator-0", "execution_versions", "insert"): 6,
    }
    breakdown = Breakdown(counts)
    assert breakdown.total == 15
    assert breakdown.by_service() == {"checkpointer": 5, "orchestrator": 6, "sandbox": 4}
    assert breakdown.by_command() == {"find": 7, "insert": 6, "update": 2}
    assert breakdown.rows()[0] == ("checkpointer", "checkpoint_heads", "find", 3)
    rendered = breakdown.render("one execution")
    assert rendered.startswith("one execution: 15 store commands")
    assert "checkpointer 5, orchestrator 6, sandbox 4" in rendered
    assert from_rows(as_rows(counts)) == counts
    assert per_execution(counts, 3) == {
        "commands": 15,
        "executions": 3,
        "total": 5.0,
        "by_service": {"checkpointer": 1.67, "orchestrator": 2.0, "sandbox": 1.33},
        "by_command": {"find": 2.33, "insert": 2.0, "update": 0.67},
    }
    assert per_execution(counts, 0) is None


def test_a_copy_names_the_new_execution_everywhere_and_keeps_the_rest() -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    document = {
        "_id": f'["{old}","",1]',
        "thread_id": old,
        "nested": {f"{old}:key": [old, 7, None]},
        "checkpoint": Binary(b"\xa4" + old.encode() + b"\x00", 0),
        "raw": old.encode(),
        "count": 3,
    }
    copy = replaced(document, old, new)
    assert copy == {
        "_id": f'["{new}","",1]',
        "thread_id": new,
        "nested": {f"{new}:key": [new, 7, None]},
        "checkpoint": Binary(b"\xa4" + new.encode() + b"\x00", 0),
        "raw": new.encode(),
        "count": 3,
    }
    assert document["thread_id"] == old  # the template is left as it was
    made = list(copies([{"_id": ObjectId(), "execution_id": old}], old, new))
    assert made == [{"execution_id": new}]  # a driver-made id is left to the server


def test_the_store_is_found_from_its_address() -> None:
    assert procstats._port_of("mongodb://127.0.0.1:27117/", 27017) == 27117
    assert procstats._port_of("mongodb://u:p@h1:1234,h2:5678/db?x=1", 27017) == 1234
    assert procstats._port_of("mongodb://localhost/", 27017) == 27017
    assert procstats._port_of("postgres://interlock@127.0.0.1:25432/ferretdb", 5432) == 25432
    # Nothing listens on port 1 here: a remote store has no local processes.
    assert procstats.store_pids("mongodb://127.0.0.1:1/") == {}


def test_a_process_tree_costs_at_least_its_root() -> None:
    own = procstats.cpu_seconds(os.getpid())
    tree = procstats.tree_cpu_seconds(os.getpid())
    assert own is not None and tree is not None and tree >= own


def test_command_seconds_are_the_histograms_sums() -> None:
    text = _exposition([("find", "steps"), ("find", "steps"), ("insert", "checkpoints")])
    seconds = parse_seconds(text, "sandbox-0")
    assert seconds == {
        ("sandbox-0", "steps", "find"): pytest.approx(0.002),
        ("sandbox-0", "checkpoints", "insert"): pytest.approx(0.001),
    }
    assert diff_seconds(seconds, {("sandbox-0", "steps", "find"): 0.002}) == {
        ("sandbox-0", "checkpoints", "insert"): pytest.approx(0.001)
    }


def test_a_stored_document_is_charged_to_the_turn_it_names() -> None:
    turn, other = str(uuid.uuid4()), str(uuid.uuid4())
    ids = {turn: (0, 1)}
    assert owner_of({"_id": f'["{turn}",""]', "thread_id": turn}, ids) == turn
    assert owner_of({"_id": f"{turn}:3"}, ids) == turn
    assert owner_of({"_id": ObjectId(), "execution_id": turn}, ids) == turn
    assert owner_of({"_id": f'["{other}",""]'}, ids) is None
    assert owner_of({"_id": "bench", "count": 3}, ids) is None
    assert document_bytes({"a": "x"}) == len(bson.encode({"a": "x"}))


def test_the_periodic_sweep_is_counted_apart_by_service_collection_and_command() -> None:
    counts = {
        ("notifier-0", "notification_outbox", "find"): 2,
        ("notifier-0", "notification_outbox", "update"): 1,
        ("sandbox-0", "checkpoint_heads", "find"): 1,
    }
    own, caught = split_periodic(counts)
    assert caught == 2
    assert own == {
        ("notifier-0", "notification_outbox", "update"): 1,
        ("sandbox-0", "checkpoint_heads", "find"): 1,
    }


def test_growth_is_the_last_turn_over_the_first_and_the_slope_after_the_first() -> None:
    # Turn 1 is cheaper (nothing before it to read); from turn 2 on, flat.
    flat = growth({1: 23.0, 2: 29.0, 3: 29.0, 4: 29.0})
    assert (flat["first"], flat["last"], flat["ratio"]) == (23.0, 29.0, 1.261)
    assert flat["slope_per_turn"] == 0.0
    rising = growth({1: 100.0, 2: 110.0, 3: 120.0, 4: None, 5: 140.0})
    assert rising["last_turn"] == 5 and rising["ratio"] == 1.4
    assert rising["slope_per_turn"] == 10.0
    assert growth({1: 5.0})["ratio"] is None
    assert growth({2: 5.0, 3: 6.0})["ratio"] is None  # no turn 1
    assert growth({1: 1.0, 2: 2.0, 3: 3.0}, first=2)["slope_per_turn"] is None  # one point
    assert slope([(1, 1.0), (1, 2.0)]) is None


def _window(turn: int, ms: list[float], counts: dict[tuple[str, str, str], int]) -> Window:
    sent = [
        Sent(
            i,
            turn,
            100.0,
            execution_id=f"{turn}-{i}",
            ended_at=100.0 + v / 1000,
            status="completed",
        )
        for i, v in enumerate(ms)
    ]
    cpu = {
        "per_process_seconds": {"sandbox-0": 0.1, "infra:ferretdb": 0.2, "infra:kafka": 1.0},
        "measured_seconds": 0.1,
        "machine_busy_seconds": 1.0,
        "wall_seconds": 1.0,
        "cores": 2,
    }
    seconds = {k: 0.001 * n for k, n in counts.items()}
    return Window(turn, sent, counts, seconds, cpu)


def test_a_turn_row_is_per_conversation_and_the_summary_says_what_changed() -> None:
    first = {
        ("gateway-0", "executions", "find"): 4,
        ("sandbox-0", "checkpoint_heads", "findAndModify"): 2,
    }
    later = {**first, ("sandbox-0", "checkpoint_heads", "find"): 2}
    stored = {
        "1-0": {"collections": {"checkpoint_heads": 100, "executions": 50}, "state_bytes": 40},
        "1-1": {"collections": {"checkpoint_heads": 120, "executions": 50}, "state_bytes": 60},
        "2-0": {"collections": {"checkpoint_heads": 200, "checkpoints": 100}, "state_bytes": 80},
    }
    windows = [_window(1, [100.0, 300.0], first), _window(2, [200.0, 200.0], later)]
    paired = [
        Paired(0, "first", Sent(-2, 1, 10.0, "a", 10.1, "completed"), windows[0].cpu, first),
        Paired(0, "second", Sent(-2, 2, 10.0, "b", 10.2, "completed"), windows[0].cpu, later),
        Paired(
            0,
            "later",
            Sent(0, 3, 10.0, "c", 10.3, "completed"),
            windows[0].cpu,
            later,
            {k: 0.001 * n for k, n in later.items()},
        ),
    ]
    figure = summarise(windows, paired, stored, conversations=2)
    one, two = figure["per_turn"]
    assert (one["commands"], two["commands"]) == (3.0, 4.0)
    assert one["by_service"] == {"checkpointer": 1.0, "gateway": 2.0}
    assert one["latency_ms"] == {"p50": 200.0, "min": 100.0, "max": 300.0}
    assert (one["cpu_ms"], one["store_cpu_ms"], one["machine_busy_share"]) == (50.0, 100.0, 0.5)
    assert (one["checkpoint_bytes"], one["state_bytes"], one["stored_bytes"]) == (
        110.0,
        50.0,
        160.0,
    )
    assert two["stored_bytes_by_collection"] == {"checkpoint_heads": 200.0, "checkpoints": 100.0}
    assert one["command_ms"] == 3.0
    assert figure["reported_turns"] == [1, 2]
    assert figure["growth"]["commands"]["ratio"] == 1.333
    assert figure["changed_commands"] == [["checkpointer", "checkpoint_heads", "find", 0, 1.0]]
    assert figure["changed_commands_from_turn_2"] == []
    assert figure["failures"] == []
    p = figure["paired"]
    assert [p[k]["latency_ms_p50"] for k in ("first", "second", "later")] == [100.0, 200.0, 300.0]
    assert p["later"]["commands_p50"] == 8.0
    assert p["later_vs_first"]["latency_ms_p50"] == 3.0
    assert p["later_vs_second"]["commands_p50"] == 1.0
    assert p["later"]["command_ms_by_command_p50"]["checkpointer checkpoint_heads find"] == 2.0
