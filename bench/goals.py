"""The issue's targets and the peer ratios, computed from the figures (pure)."""

from __future__ import annotations

from typing import Any

FLOOR = "langgraph-mongodb"
"""The in-process floor with the services' own checkpointer kind (MongoDB saver, FerretDB)."""
DBOS_POSTGRES = "dbos-postgres"
"""DBOS Transact on a PostgreSQL system database: a durable-workflow engine on the same kind of
server as Interlock's store, the peer Interlock's throughput is held against."""


def _get(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 3)


def ratios(figures: dict[str, Any]) -> dict[str, Any]:
    """Interlock (separate processes, 1 sandbox) against each peer: throughput (higher is
    better), latency p50 and CPU per execution (lower is better)."""
    dist = figures.get("distributed", {})
    out: dict[str, Any] = {}
    for kind, peer in (figures.get("peers") or {}).items():
        entry = {
            "throughput": _ratio(
                _get(dist, "throughput", "1", "per_second"), _get(peer, "throughput", "per_second")
            ),
            "cpu_per_execution": _ratio(
                _get(dist, "throughput", "1", "cpu_ms_per_execution"),
                _get(peer, "throughput", "cpu_ms_per_execution"),
            ),
        }
        for name in ("invoke_to_suspended", "decision_to_next_step", "decision_to_completed"):
            entry[f"{name}_p50"] = _ratio(
                _get(dist, "latency", "median", name, "p50_ms"),
                _get(peer, "latency", "median", name, "p50_ms"),
            )
        out[kind] = entry
    return out


def _target(
    name: str, goal: str, measured: float | None, limit: float, higher: bool
) -> dict[str, Any]:
    if measured is None:
        return {"name": name, "goal": goal, "measured": None, "met": None, "off_by": None}
    met = measured >= limit if higher else measured <= limit
    off_by = None if met else round(limit / measured if higher else measured / limit, 2)
    return {"name": name, "goal": goal, "measured": measured, "met": met, "off_by": off_by}


def peer_throughput_target(figures: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """Interlock's throughput (separate processes, 1 sandbox: the ratio table's) at least the
    peer's, both measured in the same run; not measured when either is missing."""
    return _target(
        f"throughput >= {name} (same run; separate processes, 1 sandbox)",
        ">= 1.0x",
        ratios(figures).get(kind, {}).get("throughput"),
        1.0,
        True,
    )


def evaluate(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with the measured figure; ``off_by`` is the factor by which it is missed."""
    dist = figures.get("distributed", {})
    best = max(
        (t.get("per_second") or 0 for t in (dist.get("throughput") or {}).values()), default=None
    )
    resume = _get(dist, "latency", "median", "decision_to_next_step") or {}
    steps = [int(s) for s in (dist.get("replay") or {})]
    replay = _get(dist, "replay", str(max(steps)), "replay_us_per_step") if steps else None
    cpu = _get(dist, "throughput", "1", "cpu_ms_per_execution")
    floor = _get(figures, "peers", FLOOR, "throughput", "cpu_ms_per_execution")
    commands = _get(dist, "throughput", "1", "store_commands_per_execution", "total")
    history = figures.get("history") or {}
    targets = [
        _target("decision -> next step p50", "<= 15 ms", resume.get("p50_ms"), 15, False),
        _target("decision -> next step p99", "<= 60 ms", resume.get("p99_ms"), 60, False),
        _target("full executions per second", ">= 50 /s", best or None, 50, True),
        _target(
            "RSS growth per 10,000 suspended",
            "<= 5 MB",
            _get(dist, "idle", "rss_growth_mb_per_10k"),
            5,
            False,
        ),
        _target("replay per cached step", "<= 50 us", replay, 50, False),
        _target("CPU per execution vs in-process LangGraph", "<= 2x", _ratio(cpu, floor), 2, False),
        _target(
            "store commands per execution (1 sandbox, sweeps included)",
            "<= 40",
            commands,
            40,
            False,
        ),
        _target(
            "store commands per execution, history vs empty store",
            "<= 1.1x",
            _ratio(
                _get(history, "history", "store_commands", "total"),
                _get(history, "empty", "store_commands", "total"),
            ),
            1.1,
            False,
        ),
        _target(
            "decision -> next step p50, history vs empty store",
            "<= 1.1x",
            _ratio(
                _get(history, "history", "decision_to_next_step", "p50_ms"),
                _get(history, "empty", "decision_to_next_step", "p50_ms"),
            ),
            1.1,
            False,
        ),
        peer_throughput_target(figures, DBOS_POSTGRES, "DBOS on PostgreSQL"),
        *_hot_path_targets(figures),
        *_issue_35_targets(figures),
    ]
    return [
        *targets,
        *_backlog_targets(figures.get("backlog")),
        *_idle_streams_targets(figures.get("idle_streams")),
        *_turns_targets(figures.get("turns")),
    ]


def _hot_path_targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 20's targets that the standing figures measure: Interlock's own CPU per execution
    (separate processes, 1 sandbox, at saturation), three sandboxes against one, and the
    embedded mode against DBOS on SQLite (throughput, and decision -> next step p50 at half of
    each one's saturation)."""
    dist = figures.get("distributed", {})
    throughput = dist.get("throughput") or {}
    one, three = _get(throughput, "1", "per_second"), _get(throughput, "3", "per_second")
    embedded = figures.get("embedded") or {}
    dbos = _get(figures, "peers", "dbos-sqlite") or {}
    low = _get(dist, "latency_low", "median") or {}
    half = _get(dist, "latency", "median", "decision_to_next_step") or {}
    low_resume = low.get("decision_to_next_step") or {}
    return [
        _target(
            "decision -> next step p50 at 10% of saturation",
            "<= 15 ms",
            low_resume.get("p50_ms"),
            15,
            False,
        ),
        _target(
            "decision -> next step p99 at 10% of saturation",
            "<= 60 ms",
            low_resume.get("p99_ms"),
            60,
            False,
        ),
        _target(
            "invoke -> suspended p50 at 10% of saturation",
            "<= 40 ms",
            _get(low, "invoke_to_suspended", "p50_ms"),
            40,
            False,
        ),
        _target(
            "decision -> next step p50 at 50% of saturation",
            "<= 50 ms",
            half.get("p50_ms"),
            50,
            False,
        ),
        _target(
            "Interlock's own CPU per execution (1 sandbox, saturation)",
            "<= 30 ms",
            _get(throughput, "1", "cpu_ms_per_execution"),
            30,
            False,
        ),
        _target("3 sandboxes vs 1 (throughput)", ">= 1.0x", _ratio(three, one), 1.0, True),
        _target(
            "embedded throughput vs DBOS on SQLite (same run)",
            ">= 1.0x",
            _ratio(
                _get(embedded, "throughput", "per_second"),
                _get(dbos, "throughput", "per_second"),
            ),
            1.0,
            True,
        ),
        _target(
            "embedded decision -> next step p50 vs DBOS on SQLite",
            "<= 1.0x",
            _ratio(
                _get(embedded, "latency", "median", "decision_to_next_step", "p50_ms"),
                _get(dbos, "latency", "median", "decision_to_next_step", "p50_ms"),
            ),
            1.0,
            False,
        ),
    ]


LATENCY_FIGURES = ("invoke_to_suspended", "decision_to_next_step", "decision_to_completed")
SDK_BEFORE_PER_SECOND = 6.22
"""langgraph-sdk executions a second at 10 in flight when issue 35 was filed (fef8514)."""


def worst_low_load_ratio(dist: dict[str, Any]) -> float | None:
    """The largest of each latency figure's p50 and p99 at 10% of saturation divided by the same
    at half: above 1.0, something on the path waits on a timer instead of on work."""
    found = [
        _ratio(
            _get(dist, "latency_low", "median", name, percentile),
            _get(dist, "latency", "median", name, percentile),
        )
        for name in LATENCY_FIGURES
        for percentile in ("p50_ms", "p99_ms")
    ]
    measured = [r for r in found if r is not None]
    return max(measured) if measured else None


def _issue_35_targets(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 35's: no latency worse at low load than at half, Interlock's CPU per execution
    halved, and the LangGraph routes on the native API's cost (``bench/native_workload.py``)."""
    dist = figures.get("distributed", {})
    sdk = _get(figures, "sdk_workload", "interlock") or {}
    return [
        _target(
            "every latency p50 / p99 at 10% of saturation vs at half (the worst)",
            "<= 1.0x",
            worst_low_load_ratio(dist),
            1.0,
            False,
        ),
        _target(
            "Interlock's own CPU per execution, half of issue 35's 66 ms",
            "<= 33 ms",
            _get(dist, "throughput", "1", "cpu_ms_per_execution"),
            33,
            False,
        ),
        _target(
            "langgraph-sdk CPU per execution vs the native API (same services, same run)",
            "<= 1.2x",
            _get(figures, "sdk_workload", "native_ratios", "cpu_ms_per_execution"),
            1.2,
            False,
        ),
        _target(
            "langgraph-sdk executions/s at 10 in flight, twice fef8514's 6.22",
            ">= 12.44 /s",
            _get(sdk, "concurrent", "per_second"),
            2 * SDK_BEFORE_PER_SECOND,
            True,
        ),
    ]


FETCH_BUFFER_MB = 1.048576
"""aiokafka buffers at most one fetched batch per partition, of at most
``max_partition_fetch_bytes`` (1 MiB by default), until the consumer takes it: the most a
backlog can add to a consumer whose window is full."""
SLACK_MB = 2.0
"""Allocator noise on top of that."""


def flat_growth_mb(partitions: int) -> float:
    """The RSS growth under a backlog that still counts as flat for a consumer of
    ``partitions`` partitions."""
    return round(partitions * FETCH_BUFFER_MB + SLACK_MB, 1)


def _backlog_targets(backlog: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue 19's back-pressure: a consumer at its limit holds no more than its buffer, and its
    memory stays flat whatever waits on the broker."""
    if not backlog:
        return []
    growth = backlog.get("rss_growth_with_full_backlog_bytes")
    flat_mb = flat_growth_mb(backlog["partitions"])
    return [
        _target(
            "messages a consumer holds under a backlog",
            f"<= {backlog['buffer']} (its buffer)",
            backlog.get("held_peak"),
            backlog["buffer"],
            False,
        ),
        _target(
            f"consumer RSS growth, backlog of {backlog['small_backlog_messages']:,} ->"
            f" {backlog['messages']:,}",
            f"<= {flat_mb:g} MB (one fetched batch per partition, whatever the backlog)",
            None if growth is None else round(growth / 1e6, 2),
            flat_mb,
            False,
        ),
    ]


IDLE_STREAMS_CORE_PERCENT = 5.0


def _idle_streams_targets(figure: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Open streams cost nothing while idle: the gateway's share of one core with them open
    (not measured unless every stream asked for stayed open through the window)."""
    if not figure:
        return []
    share = figure.get("gateway_core_percent")
    whole = figure.get("streams_open") == figure.get("streams")
    return [
        _target(
            f"{figure['streams']:,} idle execution streams on one gateway: CPU",
            f"< {IDLE_STREAMS_CORE_PERCENT:g}% of one core",
            float(share) if whole and share is not None else None,
            IDLE_STREAMS_CORE_PERCENT,
            False,
        )
    ]


TURN_GROWTH = 1.1
"""Issue 33: a conversation's turn 50 costs within 10% of its turn 1."""


def _turns_targets(figure: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A conversation's late turn against its first (figure 13): the store commands of its last
    lock-step turn against its first (a count: exact), and the request -> completed p50 of the
    paired rounds, where late and first turns alternate on the same machine (the lock step's
    turn 1 and its last are minutes apart, and other users' load moves in between)."""
    growth = (figure or {}).get("growth")
    if not figure or not growth:
        return []
    last = growth["commands"].get("last_turn")
    paired = figure.get("paired") or {}
    later = paired.get("later") or {}
    if later.get("requests"):
        low, high = later["turns"]
        latency_name = f"conversation turns {low}-{high} vs turn 1: request -> completed p50"
        latency = (paired.get("later_vs_first") or {}).get("latency_ms_p50")
    else:
        latency_name = f"conversation turn {last} vs turn 1: request -> completed p50"
        latency = growth["latency_ms"].get("ratio")
    return [
        _target(
            f"conversation turn {last} vs turn 1: store commands",
            f"<= {TURN_GROWTH:g}x",
            growth["commands"].get("ratio"),
            TURN_GROWTH,
            False,
        ),
        _target(latency_name, f"<= {TURN_GROWTH:g}x", latency, TURN_GROWTH, False),
    ]
