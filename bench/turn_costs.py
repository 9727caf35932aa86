"""Figure 13's arithmetic (bench/turns.py drives it): from the windows of turns, the paired
rounds and the documents read back, to each turn's costs and how they grow. Pure: no I/O."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import bson

from bench import commands
from bench.procstats import STORE

PERIODIC = frozenset({("notifier", "notification_outbox", "find")})
"""(service, collection, command) of the one sweep a window may still catch: the notifier's
delivery poll (section 7's idle count shows it). A turn that never waits for a review asks
nothing of the notifier."""
REPORTED = (1, 2, 10, 25, 50)
"""The turns the page shows (those the run reached), beside the last."""
CHECKPOINT_PREFIX = "checkpoint"
"""The checkpointer's collections (``checkpoint_heads``, ``checkpoints``, ...)."""
CHECKPOINT_HEADS = "checkpoint_heads"
GROWING = (
    "commands",
    "command_ms",
    "cpu_ms",
    "store_cpu_ms",
    "checkpoint_bytes",
    "state_bytes",
    "stored_bytes",
)
"""The per-turn figures whose growth is computed (latency's too, from its median)."""
DETAIL = ("rows", "command_ms_rows", "stored_bytes_by_collection")
"""A turn's breakdowns, kept in the summary for the turns it reports."""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class Sent:
    """One turn sent: when (wall clock), the execution it became, and when it ended."""

    conversation: int
    turn: int
    sent_at: float
    execution_id: str | None = None
    ended_at: float | None = None
    status: str | None = None
    error: str | None = None

    @property
    def ms(self) -> float | None:
        """Request -> completed."""
        if self.status != "completed" or self.ended_at is None:
            return None
        return (self.ended_at - self.sent_at) * 1000


@dataclass
class Window:
    """Turn ``turn`` of every conversation: what was sent, the store commands counted and the
    seconds spent in them, the CPU of every process."""

    turn: int
    sent: list[Sent]
    counts: commands.Counts = field(default_factory=dict)
    seconds: commands.Seconds = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)

    def raw(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "sent": [vars(s) for s in self.sent],
            "store_commands": commands.as_rows(self.counts),
            "store_command_seconds": [[*k, round(v, 6)] for k, v in sorted(self.seconds.items())],
            "cpu": self.cpu,
        }


@dataclass
class Paired:
    """One request of a paired round, alone on the services: which kind of turn it is
    (``first`` or ``second`` of a new conversation, ``later`` of a long one), what it cost."""

    round: int
    kind: str
    sent: Sent
    cpu: dict[str, Any]
    counts: commands.Counts = field(default_factory=dict)
    seconds: commands.Seconds = field(default_factory=dict)

    def raw(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "kind": self.kind,
            "sent": vars(self.sent),
            "cpu": self.cpu,
            "store_commands": commands.as_rows(self.counts),
            "store_command_seconds": [[*k, round(v, 6)] for k, v in sorted(self.seconds.items())],
        }


PAIRED_KINDS = ("first", "second", "later")


def owner_of(document: Mapping[str, Any], ids: Mapping[str, Any]) -> str | None:
    """The turn's execution a stored document belongs to: the one named by its
    ``execution_id``, ``thread_id`` (a checkpoint's thread is its execution) or ``_id`` (often
    built from the execution's id: ``["<id>", ""]``, ``<id>:<n>``); None for a document of no
    measured turn."""
    for name in ("execution_id", "thread_id", "_id"):
        value = document.get(name)
        if isinstance(value, str):
            for found in _UUID.findall(value):
                if found in ids:
                    return str(found)
    return None


def document_bytes(document: Mapping[str, Any]) -> int:
    """A document's BSON size: what the store is sent for it."""
    return len(bson.encode(document))


def split_periodic(
    counts: Mapping[commands.Key, float], periodic: frozenset[tuple[str, str, str]] = PERIODIC
) -> tuple[dict[commands.Key, float], float]:
    """A window's counts (or seconds) without the periodic sweep's, told by service,
    collection and command, and how much of the sweep's it caught."""
    own: dict[commands.Key, float] = {}
    caught = 0.0
    for (process, collection, command), n in counts.items():
        if (commands.service_of(process, collection), collection, command) in periodic:
            caught += n
        else:
            own[(process, collection, command)] = n
    return own, caught


def _median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _cpu_ms(cpu: Mapping[str, Any], requests: int) -> tuple[float | None, float | None]:
    """Interlock's processes' and the store's CPU ms per request of a measured interval."""
    if not cpu:
        return None, None
    per_process = cpu.get("per_process_seconds") or {}
    store = sum(v for k, v in per_process.items() if k in STORE)
    ours = float(cpu.get("measured_seconds") or 0)
    return _round(ours * 1000 / requests), _round(store * 1000 / requests)


def turn_row(window: Window, stored: Mapping[str, Any], conversations: int) -> dict[str, Any]:
    """One turn of the figure, per conversation: its store commands (in all, by service, and by
    service, collection and command) and the time the services spent in them, its latency
    (request -> completed: median, fastest, slowest), CPU, and the bytes it left stored."""
    own, caught = split_periodic(window.counts)
    counted = commands.Breakdown({k: int(v) for k, v in own.items()})
    spent, _ = split_periodic(window.seconds)
    latencies = [s.ms for s in window.sent if s.ms is not None]
    cpu, store_cpu = _cpu_ms(window.cpu, conversations)
    mine = [stored[i] for s in window.sent if (i := s.execution_id) is not None and i in stored]
    by = [m["collections"] for m in mine]
    checkpoint = [sum(v for k, v in c.items() if k.startswith(CHECKPOINT_PREFIX)) for c in by]
    time_rows: dict[tuple[str, str, str], float] = {}
    for (process, collection, command), seconds in spent.items():
        key = (commands.service_of(process, collection), collection, command)
        time_rows[key] = time_rows.get(key, 0.0) + seconds
    return {
        "turn": window.turn,
        "completed": len(latencies),
        "commands": round(counted.total / conversations, 2),
        "by_service": counted.per(conversations),
        "rows": [[s, c, cmd, round(n / conversations, 2)] for s, c, cmd, n in counted.rows()],
        "periodic_commands": int(caught),
        "command_ms": _round(sum(spent.values()) * 1000 / conversations, 2),
        "command_ms_rows": [
            [*k, round(v * 1000 / conversations, 2)] for k, v in sorted(time_rows.items())
        ],
        "latency_ms": {
            "p50": _round(_median(latencies)),
            "min": _round(min(latencies, default=None)),
            "max": _round(max(latencies, default=None)),
        },
        "cpu_ms": cpu,
        "store_cpu_ms": store_cpu,
        "machine_busy_share": busy_share(window.cpu),
        "checkpoint_bytes": _round(_median(checkpoint)),
        "state_bytes": _round(_median(m.get("state_bytes") for m in mine)),
        "stored_bytes": _round(_median(sum(c.values()) for c in by)),
        "stored_bytes_by_collection": {
            k: _round(_median(c.get(k, 0) for c in by)) for k in sorted({k for c in by for k in c})
        },
    }


def busy_share(cpu: Mapping[str, Any]) -> float | None:
    """How busy the machine's cores were over a measured interval (the services' work and
    everyone else's): its busy CPU seconds over its wall seconds times its cores."""
    busy, wall, cores = (cpu.get(k) for k in ("machine_busy_seconds", "wall_seconds", "cores"))
    if busy is None or not wall or not cores:
        return None
    return round(min(float(busy) / (float(wall) * int(cores)), 1.0), 2)


def growth(series: Mapping[int, float | None], first: int = 1) -> dict[str, Any]:
    """How a per-turn figure moves from turn ``first`` to the last turn: both values, their
    ratio, and the least-squares slope per turn over the turns after ``first`` (turn 1 starts
    from nothing, every later turn from the one before: the slope is the growth, the ratio
    holds that first step too)."""
    known = {t: v for t, v in series.items() if v is not None}
    if first not in known or len(known) < 2:
        return {"first": known.get(first), "last": None, "ratio": None, "slope_per_turn": None}
    last = max(known)
    return {
        "first_turn": first,
        "last_turn": last,
        "first": known[first],
        "last": known[last],
        "ratio": round(known[last] / known[first], 3) if known[first] else None,
        "slope_per_turn": slope([(t, v) for t, v in sorted(known.items()) if t > first]),
    }


def slope(points: Sequence[tuple[int, float]]) -> float | None:
    """The least-squares slope of ``(x, y)`` points; None for fewer than two distinct x."""
    if len(points) < 2:
        return None
    mean_x = statistics.fmean(float(x) for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    return round(sum((x - mean_x) * (y - mean_y) for x, y in points) / spread, 4)


def changed_rows(first: Mapping[str, Any], last: Mapping[str, Any]) -> list[list[Any]]:
    """(service, collection, command, count at the first turn, at the last) of every command
    whose count per turn differs between the two turns: where the growth is, if any."""
    before = {tuple(r[:3]): r[3] for r in first["rows"]}
    after = {tuple(r[:3]): r[3] for r in last["rows"]}
    return [
        [*k, before.get(k, 0), after.get(k, 0)]
        for k in sorted(before.keys() | after.keys())
        if before.get(k, 0) != after.get(k, 0)
    ]


def _time_rows(seconds: Mapping[commands.Key, float], per: int) -> dict[str, float]:
    """Milliseconds in store commands by ``service collection command`` (the periodic sweep's
    left out), per request of ``per``."""
    spent, _ = split_periodic(seconds)
    rows: dict[str, float] = {}
    for (process, collection, command), value in spent.items():
        key = f"{commands.service_of(process, collection)} {collection} {command}"
        rows[key] = rows.get(key, 0.0) + value * 1000 / per
    return rows


def paired_summary(paired: Sequence[Paired]) -> dict[str, Any] | None:
    """The paired rounds: per kind of turn (``PAIRED_KINDS``), how many, which turns, the
    median latency, CPU, store commands and time in them per request, and the median time by
    command; then each kind against the first and the second turn."""
    if not paired:
        return None
    out: dict[str, Any] = {"rounds": max(p.round for p in paired) + 1}
    for kind in PAIRED_KINDS:
        chosen = [p for p in paired if p.kind == kind and p.sent.ms is not None]
        cpu = [_cpu_ms(p.cpu, 1) for p in chosen]
        own = [split_periodic(p.counts)[0] for p in chosen]
        times = [_time_rows(p.seconds, 1) for p in chosen]
        keys = sorted({k for t in times for k in t})
        out[kind] = {
            "requests": len(chosen),
            "turns": [min((p.sent.turn for p in chosen), default=0),
                      max((p.sent.turn for p in chosen), default=0)],
            "latency_ms_p50": _round(_median(p.sent.ms for p in chosen)),
            "cpu_ms_p50": _round(_median(c[0] for c in cpu)),
            "store_cpu_ms_p50": _round(_median(c[1] for c in cpu)),
            "commands_p50": _round(_median(sum(o.values()) for o in own)),
            "command_ms_p50": _round(_median(sum(t.values()) for t in times), 2),
            "command_ms_by_command_p50": {
                k: _round(_median(t.get(k, 0.0) for t in times), 2) for k in keys
            },
        }  # fmt: skip
    measures = (
        "latency_ms_p50",
        "cpu_ms_p50",
        "store_cpu_ms_p50",
        "commands_p50",
        "command_ms_p50",
    )
    for base in ("first", "second"):
        out[f"later_vs_{base}"] = {k: _quotient(out["later"][k], out[base][k]) for k in measures}
    return out


def _quotient(top: float | None, bottom: float | None) -> float | None:
    return round(top / bottom, 3) if top is not None and bottom else None


def summarise(
    windows: Sequence[Window],
    paired: Sequence[Paired],
    stored: Mapping[str, Any],
    conversations: int,
) -> dict[str, Any]:
    rows = [turn_row(w, stored, conversations) for w in windows]
    by_turn = {r["turn"]: r for r in rows}
    out: dict[str, Any] = {
        "conversations": conversations,
        "turns": len(rows),
        "per_turn": rows,
        "paired": paired_summary(paired),
        "failures": [
            f"conversation {s.conversation} turn {s.turn}: {s.status} {s.error or ''}".strip()
            for s in [*(s for w in windows for s in w.sent), *(p.sent for p in paired)]
            if s.status != "completed"
        ][:5],
    }
    if not rows:
        return out
    last = max(by_turn)
    out["reported_turns"] = reported = sorted({t for t in REPORTED if t <= last} | {last})
    for row in rows:  # the breakdowns of the turns the page shows (every turn's: the raw JSON)
        if row["turn"] not in reported and row["turn"] != 2:
            for key in DETAIL:
                row.pop(key)
    out["growth"] = {name: growth({t: r[name] for t, r in by_turn.items()}) for name in GROWING}
    out["growth"]["latency_ms"] = growth({t: r["latency_ms"]["p50"] for t, r in by_turn.items()})
    if 2 in by_turn and last > 2:
        out["growth_from_turn_2"] = {
            name: growth({t: r[name] for t, r in by_turn.items()}, first=2) for name in GROWING
        }
        out["growth_from_turn_2"]["latency_ms"] = growth(
            {t: r["latency_ms"]["p50"] for t, r in by_turn.items()}, first=2
        )
    out["changed_commands"] = changed_rows(by_turn[min(by_turn)], by_turn[last])
    if 2 in by_turn:
        out["changed_commands_from_turn_2"] = changed_rows(by_turn[2], by_turn[last])
    return out
