"""What open execution streams cost a gateway while nothing happens (the issue: "1,000 idle
execution streams on one gateway cost under 5% of a core").

Against the distributed stack: some ``bench-pipeline`` executions are left at their review
(suspended), then the harness opens ``streams`` execution streams on the one gateway, spread
over those executions, waits until every stream has had its first events (the trail and the
``interrupt``), lets them settle, and reads the gateway process's CPU from ``/proc`` over a
window in which nothing else is asked of the services. Only the gateway's CPU is the figure:
the harness holds the other end of the 1,000 connections, and its CPU (reported beside) is
never counted. A window of the same gateway with no stream open comes first, as the baseline
the streams are compared against.

The gateway runs with its production settings: a key may hold ``stream_max_per_key`` streams
(20) per process, so the streams are spread over as many keys as that takes (50 for 1,000),
as many people watching would be; each key is re-read once per ``stream_key_check_seconds``
(5 s) however many streams it holds, so the window's store commands are one read per key per
interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from bench import commands
from bench.client import BenchClient
from bench.load import open_loop
from bench.procstats import cpu_seconds, machine_busy_seconds, rss_bytes
from bench.targets import PROJECT, WORKSPACE, Distributed

GATEWAY = "gateway-0"
OPENING_AT_ONCE = 50
"""Streams being opened at the same time (each open reads the store once): enough to open 1,000
in seconds, few enough not to queue behind the gateway's store pool."""
OPEN_TIMEOUT_SECONDS = 180.0
SUSPEND_RATE = 20.0
"""Arrivals per second of the executions the streams watch (how fast they are made does not
matter to the figure; they only have to reach their review)."""


@dataclass(frozen=True)
class Sizes:
    streams: int
    """Execution streams held open during the window."""
    executions: int
    """Suspended executions they watch (stream i watches execution i mod this)."""
    seconds: float
    """The measured window, all streams open and idle."""
    baseline_seconds: float
    """The window before any stream is open (the gateway's own idle cost)."""


SIZES = {
    "smoke": Sizes(streams=6, executions=3, seconds=3, baseline_seconds=2),
    "quick": Sizes(streams=1_000, executions=50, seconds=30, baseline_seconds=15),
    "full": Sizes(streams=1_000, executions=1_000, seconds=60, baseline_seconds=60),
}


def sizes_for(mode: str, streams: int | None = None, seconds: float | None = None) -> Sizes:
    """The mode's sizes, with ``streams`` and the window's ``seconds`` overridden when given
    (the baseline window keeps its share of the measured one)."""
    sizes = SIZES[mode]
    if streams is not None:
        sizes = replace(sizes, streams=streams, executions=min(sizes.executions, streams))
    if seconds is not None:
        share = sizes.baseline_seconds / sizes.seconds
        sizes = replace(sizes, seconds=seconds, baseline_seconds=round(seconds * share, 1))
    if sizes.streams < 1 or sizes.executions < 1 or sizes.seconds <= 0:
        raise ValueError(f"nothing to measure with {sizes}")
    return sizes


@dataclass(frozen=True)
class GatewayStreamSettings:
    max_per_key: int
    key_check_seconds: float
    max_seconds: float


def gateway_stream_settings() -> GatewayStreamSettings:
    """The stream settings the gateway will read: the harness sets none, so they are the
    defaults (or what ``INTERLOCK_STREAM_*`` in the environment say, which it inherits)."""
    from services.gateway.app import GatewaySettings

    settings = GatewaySettings()
    return GatewayStreamSettings(
        settings.stream_max_per_key,
        settings.stream_key_check_seconds,
        settings.stream_max_seconds,
    )


def core_percent(cpu: float, seconds: float) -> float:
    """CPU seconds used over ``seconds`` of wall-clock time, as a percentage of one core."""
    if seconds <= 0:
        raise ValueError("the window must last")
    return round(100 * cpu / seconds, 3)


def keys_needed(streams: int, per_key: int) -> int:
    return math.ceil(streams / per_key)


def assignment(streams: int, executions: int, per_key: int) -> list[tuple[int, int]]:
    """(execution index, key index) of each stream: a key's streams on different executions
    where there are enough of them, every key at most ``per_key`` streams."""
    return [(i % executions, i // per_key) for i in range(streams)]


@dataclass(frozen=True)
class Window:
    """What the processes used over one measured interval."""

    seconds: float
    gateway_cpu_seconds: float
    harness_cpu_seconds: float
    """This process: the other end of the streams (never part of the figure)."""
    machine_busy_seconds: float
    """Every core of the machine, whoever used them (other users' work shows here)."""
    commands: commands.Counts
    """The gateway's store commands over the window."""

    def as_json(self) -> dict[str, Any]:
        counted = commands.Breakdown(self.commands)
        return {
            "seconds": round(self.seconds, 3),
            "gateway_cpu_seconds": round(self.gateway_cpu_seconds, 3),
            "gateway_core_percent": core_percent(self.gateway_cpu_seconds, self.seconds),
            "harness_cpu_seconds": round(self.harness_cpu_seconds, 3),
            "machine_busy_seconds": round(self.machine_busy_seconds, 3),
            "store_commands": {
                "total": counted.total,
                "per_second": round(counted.total / self.seconds, 3),
                "rows": [list(r) for r in counted.rows()],
            },
        }


async def measure_window(pid: int, metrics: httpx.AsyncClient, port: int, seconds: float) -> Window:
    """The gateway's CPU over ``seconds`` and its store commands around them (its /metrics is
    scraped just outside the CPU interval: the scrape is the harness's doing, not the
    streams')."""
    ports = {GATEWAY: port}
    before = await commands.scrape(metrics, ports)
    harness = os.getpid()
    cpu0, own0, busy0 = _cpu(pid), _cpu(harness), machine_busy_seconds()
    began = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - began
    cpu1, own1, busy1 = _cpu(pid), _cpu(harness), machine_busy_seconds()
    after = await commands.scrape(metrics, ports)
    return Window(
        seconds=elapsed,
        gateway_cpu_seconds=cpu1 - cpu0,
        harness_cpu_seconds=own1 - own0,
        machine_busy_seconds=busy1 - busy0,
        commands=commands.diff(after, before),
    )


def _cpu(pid: int) -> float:
    used = cpu_seconds(pid)
    if used is None:
        raise RuntimeError(f"process {pid} is gone")
    return used


@dataclass
class _Stream:
    path: str
    key: str
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the first events came (or the stream failed: then ``error`` says why)."""
    late_events: int = 0
    """Events after the first ones: none while the executions wait for their review."""
    keepalives: int = 0
    """Keep-alive comments (FastAPI sends one after 15 s without an event)."""
    error: str | None = None
    task: asyncio.Task[None] | None = None


class HeldStreams:
    """Execution streams held open by the harness, each reading its events as they come."""

    def __init__(self, base_url: str, streams: list[tuple[str, str]]) -> None:
        """``streams``: (execution id, API key) of each."""
        self._http = httpx.AsyncClient(
            base_url=base_url,
            # An idle stream sends nothing for long stretches: no read timeout.
            timeout=httpx.Timeout(30, read=None),
            limits=httpx.Limits(max_connections=len(streams) + 8, max_keepalive_connections=8),
        )
        path = f"/api/v1/projects/{PROJECT}/executions/{{}}/stream"
        self.streams = [_Stream(path.format(e), key) for e, key in streams]

    async def open(self, timeout: float) -> float:
        """Open every stream and wait for each one's first events; the seconds it took."""
        began = time.monotonic()
        gate = asyncio.Semaphore(OPENING_AT_ONCE)
        for stream in self.streams:
            stream.task = asyncio.create_task(self._follow(stream, gate))
        await asyncio.wait_for(
            asyncio.gather(*(s.ready.wait() for s in self.streams)), timeout=timeout
        )
        return time.monotonic() - began

    async def _follow(self, stream: _Stream, gate: asyncio.Semaphore) -> None:
        await gate.acquire()
        holding = True
        try:
            async with aconnect_sse(
                self._http,
                "GET",
                stream.path,
                params={"workspace_id": WORKSPACE},
                headers={"Authorization": f"Bearer {stream.key}"},
            ) as source:
                source.response.raise_for_status()
                async for event in source.aiter_sse():
                    if not event.data:
                        # httpx_sse hands a keep-alive comment on as an empty event (it keeps
                        # the last event id): not an event of the execution.
                        stream.keepalives += 1
                        continue
                    if stream.ready.is_set():
                        stream.late_events += 1
                    elif event.event == "interrupt":  # the trail is in: the stream is idle
                        stream.ready.set()
                        gate.release()
                        holding = False
            stream.error = "closed by the gateway"
        except httpx.HTTPError as exc:
            stream.error = repr(exc)[:300]
        finally:
            if holding:
                gate.release()
            stream.ready.set()

    def open_count(self) -> int:
        return sum(1 for s in self.streams if s.error is None and s.task and not s.task.done())

    def late_events(self) -> int:
        return sum(s.late_events for s in self.streams)

    def keepalives(self) -> int:
        return sum(s.keepalives for s in self.streams)

    def failures(self) -> list[str]:
        return [s.error for s in self.streams if s.error is not None]

    async def close(self) -> None:
        for stream in self.streams:
            if stream.task is not None:
                stream.task.cancel()
        for stream in self.streams:
            if stream.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await stream.task
        await self._http.aclose()


@dataclass(frozen=True)
class Rss:
    before: int | None
    """The gateway before any stream opened."""
    open: int | None
    """With every stream open, after the window."""
    closed: int | None
    """Once the streams were closed again."""


def summarise(
    sizes: Sizes,
    settings: GatewayStreamSettings,
    *,
    keys: int,
    suspended: int,
    open_seconds: float,
    streams_open: int,
    late_events: int,
    keepalives: int,
    baseline: Window,
    loaded: Window,
    rss: Rss,
    failures: list[str],
) -> dict[str, Any]:
    """The figure's JSON: the measured window, and the baseline it is compared against."""
    measured = loaded.as_json()
    base = baseline.as_json()
    # What the streams add: the window's CPU less what the gateway used at the baseline's rate.
    baseline_rate = baseline.gateway_cpu_seconds / baseline.seconds
    above = loaded.gateway_cpu_seconds - baseline_rate * loaded.seconds
    growth = None if rss.open is None or rss.before is None else rss.open - rss.before
    return {
        "streams": sizes.streams,
        "streams_open": streams_open,
        "executions": suspended,
        "keys": keys,
        "max_per_key": settings.max_per_key,
        "key_check_seconds": settings.key_check_seconds,
        "open_seconds": round(open_seconds, 2),
        "window_seconds": measured["seconds"],
        "gateway_cpu_seconds": measured["gateway_cpu_seconds"],
        "gateway_core_percent": measured["gateway_core_percent"],
        "gateway_cpu_us_per_stream_second": (
            round(above / streams_open / loaded.seconds * 1e6, 2) if streams_open else None
        ),
        "store_commands": measured["store_commands"],
        "events_during_window": late_events,
        "keepalives_during_window": keepalives,
        "harness_cpu_seconds": measured["harness_cpu_seconds"],
        "machine_busy_seconds": measured["machine_busy_seconds"],
        "baseline": base,
        "rss_before_bytes": rss.before,
        "rss_open_bytes": rss.open,
        "rss_closed_bytes": rss.closed,
        "rss_growth_bytes": growth,
        "rss_growth_kb_per_stream": (
            round(growth / 1024 / streams_open, 2) if growth is not None and streams_open else None
        ),
        "failures": failures[:5],
        "failed": len(failures),
    }


async def _api_keys(target: Distributed, count: int) -> list[str]:
    """``count`` fresh read-only keys of the bench project (reviewers watching, not owners)."""
    from shared.store.api_keys import Role, create_key
    from shared.store.mongo import MongoStore

    store = MongoStore.connect(target.mongodb, target.cluster.database)
    try:
        secrets = []
        for index in range(count):
            _, secret = await create_key(
                store.api_keys, project_id=PROJECT, role=Role.READ_ONLY, name=f"watcher-{index}"
            )
            secrets.append(secret)
        return secrets
    finally:
        await store.close()


async def _suspended(target: Distributed, count: int, timeout: float) -> list[str]:
    client: BenchClient = target.client()
    try:
        run = await open_loop(
            client, target.watcher(client), rate=SUSPEND_RATE, count=count, message="bench",
            timeout=timeout, pids={}, approve=False,
        )  # fmt: skip
    finally:
        await client.aclose()
    return [e.execution_id for e in run.executions if e.status == "suspended" and e.execution_id]


async def measure(
    target: Distributed, sizes: Sizes, timeout: float, log: Callable[[str], None]
) -> dict[str, Any]:
    """The figure against a running stack with nothing else to do."""
    settings = gateway_stream_settings()
    if sizes.seconds + OPEN_TIMEOUT_SECONDS >= settings.max_seconds:
        raise ValueError("the streams would reach their lifetime inside the window")
    pid, port = target.pids()[GATEWAY], target.metrics_ports()[GATEWAY]
    log(f"idle streams: {sizes.executions} executions to their review")
    suspended = await _suspended(target, sizes.executions, timeout)
    if not suspended:
        raise RuntimeError("no execution reached its review")
    keys = await _api_keys(target, keys_needed(sizes.streams, settings.max_per_key))
    plan = assignment(sizes.streams, len(suspended), settings.max_per_key)
    # One stream first, opened and closed: the stream path's first-use costs (imports, caches)
    # are paid before the baseline, not charged to the streams' memory.
    warm_up = HeldStreams(target.cluster.base_url, [(suspended[0], keys[0])])
    try:
        await warm_up.open(OPEN_TIMEOUT_SECONDS)
        if warm_up.failures():
            raise RuntimeError(f"an execution stream would not open: {warm_up.failures()[0]}")
    finally:
        await warm_up.close()
    async with httpx.AsyncClient(timeout=10) as metrics:
        # Done with the executions' writes before anything is counted.
        await commands.settle(metrics, {GATEWAY: port}, quiet=2, timeout=60)
        log(f"idle streams: baseline, no stream open, {sizes.baseline_seconds:g}s")
        baseline = await measure_window(pid, metrics, port, sizes.baseline_seconds)
        rss_before = rss_bytes(pid)
        streams = HeldStreams(target.cluster.base_url, [(suspended[e], keys[k]) for e, k in plan])
        try:
            log(f"idle streams: opening {sizes.streams} streams with {len(keys)} key(s)")
            open_seconds = await streams.open(OPEN_TIMEOUT_SECONDS)
            # Every stream past its first wake-up (the key re-check) before the window.
            await asyncio.sleep(settings.key_check_seconds + 1)
            late_before, keepalives_before = streams.late_events(), streams.keepalives()
            log(f"idle streams: {streams.open_count()} open, measuring {sizes.seconds:g}s")
            loaded = await measure_window(pid, metrics, port, sizes.seconds)
            streams_open = streams.open_count()
            late = streams.late_events() - late_before
            keepalives = streams.keepalives() - keepalives_before
            rss_open = rss_bytes(pid)
        finally:
            await streams.close()
        await asyncio.sleep(2)  # the gateway sees the connections go
        rss = Rss(before=rss_before, open=rss_open, closed=rss_bytes(pid))
    return summarise(
        sizes,
        settings,
        keys=len(keys),
        suspended=len(suspended),
        open_seconds=open_seconds,
        streams_open=streams_open,
        late_events=late,
        keepalives=keepalives,
        baseline=baseline,
        loaded=loaded,
        rss=rss,
        failures=streams.failures(),
    )
