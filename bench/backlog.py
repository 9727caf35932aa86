"""Figure 10: a consumer's memory under a backlog (issue 19's back-pressure: "when a replica has
its limit in flight it stops fetching rather than buffering without bound; memory stays flat
under a backlog of 100,000 messages").

One process runs one subscription exactly as the services do (``shared/kafka_bus.KafkaBus``
and ``route``: the keyed consumer, the decode, the dead-letter wrapper) with the sandbox's
limits, and a handler that only sleeps, so the consumer is at its limit throughout and nothing
but the consumer weighs on its memory. The harness publishes the backlog to its topic (small
``execution.dispatched`` messages, each of an execution of its own) and samples the process's
RSS from ``/proc`` and its gauges from ``/metrics`` while the backlog builds and drains in part.

The backlog comes in two steps. A small one first (ten buffers' worth): the consumer fills its
buffer and handles a few hundred messages, so its first-use costs (imports on the message path,
the client's fetch buffers, the allocator's arenas) are paid and its RSS is that of a consumer
at its limit. Then the rest, up to the full backlog: what RSS does from there is what the
backlog's size costs, which back-pressure should make nothing.

``python -m bench.backlog --bootstrap HOST:PORT --prefix P --port N ...`` is that process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench import gauges
from bench.modes import Mode
from bench.procstats import INFRA_PREFIX, cpu_seconds, infra_pids, rss_bytes, tree_cpu_seconds
from tests.e2e.cluster import REPO
from tests.ports import free_port

SERVICE = "backlog"
KAFKA = INFRA_PREFIX + "kafka"
SAMPLE_SECONDS = 0.5
IDLE_SECONDS = 1.5
"""Sampled before the first message: the process's own size, started and subscribed."""
PUBLISH_CHUNK = 5_000
"""Sends awaited together: the producer batches them, and the progress is sampled between."""
SMALL_BACKLOG_BUFFERS = 10
"""The first step's backlog, in buffers: several times what the consumer holds, so its buffer
stays full while it warms up."""
SMALL_BACKLOG_SECONDS = 2.0
"""How long the consumer works on it (a limit of 32 and a 100 ms handler finish 640, fewer than
the 1,280 the first step publishes: the buffer never empties)."""
EXECUTION_ID = "backlog-0000000"
"""The template's execution id, replaced in each message by one of the same length."""


# -- the consumer process -------------------------------------------------------------------


async def _consume(args: argparse.Namespace) -> None:
    from shared.bus import route
    from shared.events import ExecutionDispatched
    from shared.health import HealthServer
    from shared.kafka_bus import KafkaBus
    from shared.logging import configure_logging
    from shared.settings import CommonSettings

    configure_logging(SERVICE, level="warning", fmt="json")  # no line per message
    settings = CommonSettings(
        kafka_bootstrap_servers=args.bootstrap,
        topic_prefix=args.prefix,
        consumer_group_prefix=args.prefix.rstrip("."),
        consumer_concurrency=args.limit,
        consumer_buffer=args.buffer,
    )
    bus = KafkaBus(settings, client_id=SERVICE)
    delay = args.handler_ms / 1000

    async def handle(_: ExecutionDispatched) -> None:
        await asyncio.sleep(delay)  # a run waiting on its model: no CPU, a slot held

    route(
        bus, settings, bus.publisher, service=SERVICE, topic=settings.topics.dispatched,
        model=ExecutionDispatched, handle=handle,
    )  # fmt: skip
    health = HealthServer("127.0.0.1", args.port, {})
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await health.start()
    await bus.start()
    try:
        await stop.wait()
    finally:
        await bus.stop()
        await health.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.backlog", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--prefix", required=True, help="topic prefix and consumer group")
    parser.add_argument("--port", type=int, required=True, help="/metrics listens here")
    parser.add_argument("--limit", type=int, required=True, help="messages in flight at most")
    parser.add_argument("--buffer", type=int, required=True, help="messages held at most")
    parser.add_argument("--handler-ms", type=float, required=True)
    asyncio.run(_consume(parser.parse_args()))


# -- the harness side -----------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    at: float
    """Seconds since the process was started."""
    phase: str
    """``idle`` (nothing published yet), ``small`` (the first step's backlog), ``publishing``
    (the rest, up to the full backlog) or ``draining``."""
    published: int
    rss_bytes: int | None
    cpu_seconds: float | None
    """The consumer process's CPU so far."""
    kafka_cpu_seconds: float | None
    """The broker's (shared with whatever else uses it) so far."""
    in_flight: int | None
    held: int | None
    handled: int | None


class _Watch:
    """Samples the consumer's RSS and gauges every ``SAMPLE_SECONDS`` while the backlog is built
    and drained."""

    def __init__(self, pid: int, port: int, consumer: str, kafka_pid: int | None) -> None:
        self.pid = pid
        self.kafka_pid = kafka_pid
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.consumer = consumer
        self.began = time.monotonic()
        self.phase = "idle"
        self.published = 0
        self.points: list[Point] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Watch:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            while True:
                await self.sample(http)
                await asyncio.sleep(SAMPLE_SECONDS)

    async def sample(self, http: httpx.AsyncClient) -> None:
        in_flight = held = handled = None
        try:
            text = (await http.get(self.url)).text
        except httpx.HTTPError:
            text = None  # a busy process answers late: RSS alone for this point
        if text is not None:
            mine = [s for s in gauges.parse(text, SERVICE, 0.0) if s.consumer == self.consumer]
            if mine:
                in_flight, held = mine[0].in_flight, mine[0].held
            handled = gauges.handled(text, self.consumer)
        kafka = tree_cpu_seconds(self.kafka_pid) if self.kafka_pid else None
        self.points.append(
            Point(
                round(time.monotonic() - self.began, 3), self.phase, self.published,
                rss_bytes(self.pid), cpu_seconds(self.pid), kafka, in_flight, held, handled,
            )
        )  # fmt: skip


async def measure(
    kafka: str, mode: Mode, workdir: Path, *, limit: int, buffer: int, partitions: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Figure 10: the summary, and every sample (for the raw JSON)."""
    prefix = f"bench-backlog-{uuid.uuid4().hex[:10]}."
    topic = f"{prefix}execution.dispatched"
    await _create_topic(kafka, topic, partitions)
    port = free_port()
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    process = await asyncio.to_thread(
        _spawn, workdir / "backlog.log", kafka, prefix, port, limit, buffer, mode.backlog_handler_ms
    )
    try:
        await _wait_for_metrics(port, process, workdir / "backlog.log")
        kafka_pid = infra_pids(REPO / ".infra").get(KAFKA)
        watch = _Watch(process.pid, port, f"{SERVICE}:{topic}", kafka_pid)
        small = min(mode.backlog_messages, SMALL_BACKLOG_BUFFERS * buffer)
        async with watch, httpx.AsyncClient(timeout=5) as http:
            await asyncio.sleep(IDLE_SECONDS)
            watch.phase = "small"
            await _publish(kafka, topic, 0, small, watch)
            await asyncio.sleep(SMALL_BACKLOG_SECONDS)
            await watch.sample(http)  # the reference: warm, at its limit, a small backlog
            reference = watch.points[-1]
            watch.phase = "publishing"
            began = time.monotonic()
            await _publish(kafka, topic, small, mode.backlog_messages, watch)
            published_seconds = time.monotonic() - began
            watch.phase = "draining"
            await asyncio.sleep(mode.backlog_drain_seconds)
            await watch.sample(http)  # the end, after the last sleep
    finally:
        await asyncio.to_thread(_stop, process)
        await _delete_topic(kafka, topic)
    settings = {
        "messages": mode.backlog_messages,
        "small_backlog_messages": small,
        "partitions": partitions,
        "limit": limit,
        "buffer": buffer,
        "handler_ms": mode.backlog_handler_ms,
        "published_seconds": round(published_seconds, 2),
        "drain_seconds": mode.backlog_drain_seconds,
    }
    found = summarise(watch.points, buffer, reference)
    return {**settings, **found}, [asdict(p) for p in watch.points]


def summarise(points: list[Point], buffer: int, reference: Point) -> dict[str, Any]:
    """Start, peak and end RSS; RSS when the buffer first filled, and at the reference point
    (warm, at its limit, the small backlog waiting): from there to the full backlog's peak is
    what the backlog's size costs. The gauges while a backlog waited (more published than
    handled and held)."""
    rss = [p.rss_bytes for p in points if p.rss_bytes is not None]
    flights = [p.in_flight for p in points if p.in_flight is not None]
    idle = [p.rss_bytes for p in points if p.phase == "idle" and p.rss_bytes is not None]
    at_bound = next((p for p in points if p.held is not None and p.held >= buffer), None)
    waiting = [
        p
        for p in points
        if p.held is not None and p.handled is not None and p.published - p.handled > p.held
    ]
    last = points[-1]
    out: dict[str, Any] = {
        "rss_idle_bytes": idle[-1] if idle else None,
        "rss_at_bound_bytes": at_bound.rss_bytes if at_bound else None,
        "rss_peak_bytes": max(rss) if rss else None,
        "rss_end_bytes": last.rss_bytes,
        "bound_reached_at_published": at_bound.published if at_bound else None,
        "held_peak": max((p.held for p in points if p.held is not None), default=None),
        "held_median_while_waiting": _median([p.held for p in waiting]),
        "in_flight_peak": max(flights, default=None),
        "in_flight_median_while_waiting": _median([p.in_flight for p in waiting]),
        "backlog_peak": max((p.published - (p.handled or 0) for p in points), default=None),
        "handled": last.handled,
        "left_on_the_broker": (last.published - last.handled if last.handled is not None else None),
        "samples": len(points),
        "samples_while_waiting": len(waiting),
    }
    full = [
        p.rss_bytes
        for p in points
        if p.phase in ("publishing", "draining") and p.rss_bytes is not None
    ]
    out["rss_small_backlog_bytes"] = reference.rss_bytes
    out["small_backlog_waiting"] = (
        reference.published - reference.handled if reference.handled is not None else None
    )
    if reference.rss_bytes is not None and full:
        out["rss_growth_with_full_backlog_bytes"] = max(full) - reference.rss_bytes
    # CPU per message handled, with the small backlog and while the full one drains: a consumer
    # whose handler only sleeps should cost the same whatever waits on the broker.
    small = [p for p in points if p.phase == "small"]
    draining = [p for p in points if p.phase == "draining"]
    for name, phase in (("small_backlog", small), ("full_backlog", draining)):
        out[f"cpu_ms_per_handled_{name}"] = _per_handled(phase, "cpu_seconds")
        out[f"kafka_cpu_ms_per_handled_{name}"] = _per_handled(phase, "kafka_cpu_seconds")
    return out


def _per_handled(points: list[Point], field: str) -> float | None:
    """Milliseconds of ``field`` (a CPU counter) per message handled from the first to the last
    of ``points`` that have both."""
    known = [
        (float(value), p.handled)
        for p in points
        if (value := getattr(p, field)) is not None and p.handled is not None
    ]
    if len(known) < 2 or known[-1][1] == known[0][1]:
        return None
    (spent_before, before), (spent_after, after) = known[0], known[-1]
    return round((spent_after - spent_before) * 1000 / (after - before), 3)


def _median(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def _template() -> bytes:
    """One small ``execution.dispatched`` message (about 300 bytes), valid for the consumer's
    decode, so each message costs what a real one costs to take in."""
    from shared.events import AgentInput, DispatchKind, ExecutionDispatched, encode_event

    event = ExecutionDispatched(
        execution_id=EXECUTION_ID, project_id="bench", workspace_id="bench",
        agent="bench-pipeline", epoch=1, kind=DispatchKind.START,
        input=AgentInput(message="bench"),
    )  # fmt: skip
    return encode_event(event)


async def _publish(kafka: str, topic: str, first: int, end: int, watch: _Watch) -> None:
    """Messages ``first`` to ``end`` (exclusive), each keyed by an execution of its own (so none
    waits behind another of its key: every held message may run), as fast as the producer
    batches them."""
    template = _template()
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka, acks=1, linger_ms=20, max_batch_size=512 * 1024
    )
    await producer.start()
    try:
        pending = []
        for i in range(first, end):
            key = f"backlog-{i:07d}".encode()
            value = template.replace(EXECUTION_ID.encode(), key)
            pending.append(await producer.send(topic, value, key=key))
            if len(pending) >= PUBLISH_CHUNK or i == end - 1:
                await asyncio.gather(*pending)
                pending.clear()
                watch.published = i + 1
    finally:
        await producer.stop()


async def _create_topic(kafka: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def _delete_topic(kafka: str, topic: str) -> None:
    """The backlog's topic goes (its group's offsets expire with the broker's retention)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    except Exception as exc:  # a leftover topic is untidy, not a failed figure
        print(f"bench: could not delete {topic}: {exc!r}", file=sys.stderr)
    finally:
        await admin.close()


def _spawn(
    log: Path, kafka: str, prefix: str, port: int, limit: int, buffer: int, handler_ms: float
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "bench.backlog", "--bootstrap", kafka, "--prefix", prefix,
        "--port", str(port), "--limit", str(limit), "--buffer", str(buffer),
        "--handler-ms", str(handler_ms),
    ]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


async def _wait_for_metrics(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    async with httpx.AsyncClient(timeout=2) as http:
        for _ in range(600):
            if process.poll() is not None:
                tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-1500:]
                raise RuntimeError(f"the backlog consumer exited:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"http://127.0.0.1:{port}/metrics")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError("the backlog consumer did not serve /metrics in 60 s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()  # lets what is in flight finish, commits, leaves the group
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()
