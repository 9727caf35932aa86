"""Store commands counted from every process's ``/metrics``.

Each process times every database command into ``interlock_store_command_seconds{command,
collection}`` (``shared/store/watch.py``: the async store's client, and the sandbox
checkpointer's synchronous one); the histogram's ``_count`` series is therefore a count of
commands per (command, collection). A snapshot is every process's counts; the difference of two
snapshots is what happened between them. The command-count test (tests/e2e/test_store_commands.py)
and the benchmark's per-execution counts read them the same way, with this module.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

METRIC = "interlock_store_command_seconds"
CHECKPOINTER = "checkpointer"
"""How the breakdown names the sandbox's LangGraph checkpointer: the same process as the
sandbox, told apart by its collections (``checkpoint*``)."""

Key = tuple[str, str, str]
"""(process, collection, command); a process is ``<service>-<index>``."""
Counts = dict[Key, int]
Seconds = dict[Key, float]
T = TypeVar("T", int, float)


def parse(text: str, process: str) -> Counts:
    """The command counts in one process's Prometheus exposition."""
    counts: Counts = {}
    for family in text_string_to_metric_families(text):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            if sample.name == f"{METRIC}_count":
                key = (process, sample.labels["collection"], sample.labels["command"])
                counts[key] = int(sample.value)
    return counts


def parse_seconds(text: str, process: str) -> Seconds:
    """The seconds the commands took in one process's exposition (the histograms' ``_sum``: as
    the driver timed them, the round trip included), per (process, collection, command)."""
    seconds: Seconds = {}
    for family in text_string_to_metric_families(text):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            if sample.name == f"{METRIC}_sum":
                key = (process, sample.labels["collection"], sample.labels["command"])
                seconds[key] = float(sample.value)
    return seconds


async def _scrape_all(
    http: httpx.AsyncClient, ports: Mapping[str, int], parser: Callable[[str, str], dict[Key, T]]
) -> dict[Key, T]:
    async def one(process: str, port: int) -> dict[Key, T]:
        response = await http.get(f"http://127.0.0.1:{port}/metrics")
        response.raise_for_status()
        return parser(response.text, process)

    found: dict[Key, T] = {}
    for part in await asyncio.gather(*(one(p, port) for p, port in ports.items())):
        found.update(part)
    return found


async def scrape(http: httpx.AsyncClient, ports: Mapping[str, int]) -> Counts:
    """Every process's counts; ``ports`` maps a process name to its health listener's port.
    Reading ``/metrics`` costs no store command."""
    return await _scrape_all(http, ports, parse)


async def scrape_seconds(http: httpx.AsyncClient, ports: Mapping[str, int]) -> Seconds:
    """Every process's command seconds (``parse_seconds``)."""
    return await _scrape_all(http, ports, parse_seconds)


def diff_seconds(after: Seconds, before: Seconds) -> Seconds:
    """The seconds spent in commands between two snapshots (zeros left out)."""
    out: Seconds = {}
    for key in after.keys() | before.keys():
        delta = after.get(key, 0.0) - before.get(key, 0.0)
        if delta < 0:
            raise ValueError(f"{key} went from {before.get(key)} to {after.get(key)}: a restart?")
        if delta:
            out[key] = delta
    return out


def diff(after: Counts, before: Counts) -> Counts:
    """What was counted between two snapshots (zeros left out). A count that went down means a
    process restarted in between, which makes the difference meaningless: ValueError."""
    out: Counts = {}
    for key in after.keys() | before.keys():
        delta = after.get(key, 0) - before.get(key, 0)
        if delta < 0:
            raise ValueError(f"{key} went from {before.get(key)} to {after.get(key)}: a restart?")
        if delta:
            out[key] = delta
    return out


async def settle(
    http: httpx.AsyncClient,
    ports: Mapping[str, int],
    *,
    quiet: float,
    timeout: float,
    interval: float = 0.2,
) -> Counts:
    """Counts once they have not moved for ``quiet`` seconds: every process done with what it was
    doing (TimeoutError after ``timeout`` seconds of movement)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = await scrape(http, ports)
    since = loop.time()
    while loop.time() - since < quiet:
        if loop.time() > deadline:
            raise TimeoutError(f"store commands still moving after {timeout:g} s")
        await asyncio.sleep(interval)
        now = await scrape(http, ports)
        if now != last:
            last, since = now, loop.time()
    return last


def service_of(process: str, collection: str) -> str:
    """The breakdown's row: the process's service, the checkpointer apart from the sandbox."""
    service = process.rsplit("-", 1)[0]
    if service == "sandbox" and collection.startswith("checkpoint"):
        return CHECKPOINTER
    return service


@dataclass(frozen=True)
class Breakdown:
    """A difference of counts, grouped as the test and the benchmark page show it."""

    counts: Counts

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_service(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (process, collection, _), n in self.counts.items():
            out[service_of(process, collection)] += n
        return dict(sorted(out.items()))

    def by_command(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, _, command), n in self.counts.items():
            out[command] += n
        return _by_count(out)

    def by_collection(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for (_, collection, _), n in self.counts.items():
            out[collection] += n
        return _by_count(out)

    def rows(self) -> list[tuple[str, str, str, int]]:
        """(service, collection, command, count), by service then by count."""
        grouped: Counter[tuple[str, str, str]] = Counter()
        for (process, collection, command), n in self.counts.items():
            grouped[(service_of(process, collection), collection, command)] += n
        return sorted(((*k, n) for k, n in grouped.items()), key=lambda r: (r[0], -r[3], r[1:3]))

    def per(self, executions: int) -> dict[str, float]:
        """Per execution, by service (the benchmark's averages over a run)."""
        return {s: round(n / executions, 2) for s, n in self.by_service().items()}

    def render(self, title: str, notes: Iterable[str] = ()) -> str:
        lines = [f"{title}: {self.total} store commands"]
        lines += [f"  {note}" for note in notes]
        lines.append("  by service: " + ", ".join(f"{s} {n}" for s, n in self.by_service().items()))
        lines.append("  by command: " + ", ".join(f"{c} {n}" for c, n in self.by_command().items()))
        lines.append(
            "  by collection: " + ", ".join(f"{c} {n}" for c, n in self.by_collection().items())
        )
        lines.append(f"  {'service':<13} {'collection':<26} {'command':<14} count")
        lines += [f"  {s:<13} {c:<26} {cmd:<14} {n:>5}" for s, c, cmd, n in self.rows()]
        return "\n".join(lines)


def _by_count(counted: Counter[str]) -> dict[str, int]:
    """Largest first, ties by name: the same counts always print the same."""
    return dict(sorted(counted.items(), key=lambda item: (-item[1], item[0])))


def as_rows(counts: Counts) -> list[tuple[str, str, str, int]]:
    """Counts as JSON-friendly rows, (process, collection, command, count)."""
    return [(*key, n) for key, n in sorted(counts.items())]


def from_rows(rows: Iterable[Sequence[Any]]) -> Counts:
    return {(str(p), str(c), str(cmd)): int(n) for p, c, cmd, n in rows}


def per_execution(counts: Counts, completed: int) -> dict[str, Any] | None:
    """Commands per completed execution, in all and by service and command (None without a
    completed execution)."""
    if completed <= 0:
        return None
    breakdown = Breakdown(counts)
    return {
        "commands": breakdown.total,
        "executions": completed,
        "total": round(breakdown.total / completed, 2),
        "by_service": breakdown.per(completed),
        "by_command": {c: round(n / completed, 2) for c, n in breakdown.by_command().items()},
    }


async def rate(http: httpx.AsyncClient, ports: Mapping[str, int], seconds: float) -> dict[str, Any]:
    """Commands per second by service while nothing is asked of the services: the periodic
    sweeps (deadlines, undelivered requests, gauges, the notifier's delivery poll)."""
    before = await scrape(http, ports)
    await asyncio.sleep(seconds)
    counted = Breakdown(diff(await scrape(http, ports), before))
    return {
        "seconds": seconds,
        "per_second": round(counted.total / seconds, 3),
        "by_service": {s: round(n / seconds, 3) for s, n in counted.by_service().items()},
        "rows": [list(r) for r in counted.rows()],
    }
