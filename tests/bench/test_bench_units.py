"""The harness's store measurements without infrastructure: counting commands from /metrics,
copying an execution's documents for the history figure, finding the store's processes."""

from __future__ import annotations

import os
import uuid

import pytest
from bson import Binary, ObjectId
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from bench import procstats
from bench.commands import Breakdown, as_rows, diff, from_rows, parse, per_execution
from bench.prefill import copies, replaced


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
