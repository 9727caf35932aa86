"""The consumers' concurrency gauges, scraped from every process's ``/metrics`` while a run goes
on: ``interlock_consumer_in_flight`` (messages a subscription is handling now) and
``interlock_consumer_held`` (fetched and not finished; at the buffer bound the subscription
pauses its partitions). They are what an operator sees of a replica's concurrency, so the
concurrency figure reads them rather than inferring them from the executions' times."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.procstats import machine_busy_seconds

IN_FLIGHT = "interlock_consumer_in_flight"
HELD = "interlock_consumer_held"
HANDLED = "interlock_handled_events_total"
INTERVAL_SECONDS = 0.25
"""Between two scrapes: short enough to see a 1 s model call's slots fill and empty, long enough
that the scrapes (a few ms of each process's CPU) weigh nothing."""


@dataclass(frozen=True)
class Sample:
    at: float
    """Wall-clock time of the scrape's answer."""
    scrape: int
    """Which scrape of the sampler: the processes of one round were asked at the same time."""
    process: str
    consumer: str
    """The gauge's label: ``<service>:<topic>``."""
    in_flight: int
    held: int


def parse(text: str, process: str, at: float, scrape: int = 0) -> list[Sample]:
    """One process's concurrency gauges, a sample per subscription."""
    values: dict[str, dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (IN_FLIGHT, HELD):
            continue
        for sample in family.samples:
            consumer = sample.labels["consumer"]
            values.setdefault(consumer, {})[family.name] = int(sample.value)
    return [
        Sample(at, scrape, process, consumer, v.get(IN_FLIGHT, 0), v.get(HELD, 0))
        for consumer, v in sorted(values.items())
    ]


COLUMNS = ("at", "scrape", "process", "consumer", "in_flight", "held")


def as_rows(samples: Iterable[Sample], prefix: str = "") -> dict[str, Any]:
    """Samples for the raw JSON: the columns once, then a row per sample (thousands a run),
    the run's topic prefix left out of the subscriptions' names."""
    return {
        "columns": list(COLUMNS),
        "rows": [
            [
                round(s.at, 3),
                s.scrape,
                s.process,
                s.consumer.replace(prefix, ""),
                s.in_flight,
                s.held,
            ]
            for s in samples
        ],
    }


def handled(text: str, consumer: str) -> int:
    """Messages a subscription has finished, whatever the outcome (its handled counter)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == HANDLED and sample.labels.get("consumer") == consumer:
                total += sample.value
    return int(total)


@dataclass
class Sampler:
    """Scrapes the processes' gauges every ``interval`` seconds until stopped (``async with``)."""

    ports: Mapping[str, int]
    """Process name -> its health listener's port."""
    interval: float = INTERVAL_SECONDS
    samples: list[Sample] = field(default_factory=list)
    busy: list[tuple[float, float]] = field(default_factory=list)
    """(wall-clock time, CPU seconds the whole machine had been busy) per round: how busy it
    was over any part of the run, the steady part in particular."""
    failures: int = 0
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Sampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=5) as http:
            for index in itertools.count():
                began = time.monotonic()
                self.busy.append((time.time(), machine_busy_seconds()))
                answers = await asyncio.gather(
                    *(self._one(http, p, port, index) for p, port in self.ports.items()),
                    return_exceptions=True,
                )
                for answer in answers:
                    if isinstance(answer, BaseException):
                        self.failures += 1  # a busy process answers late: a gap, not an error
                    else:
                        self.samples.extend(answer)
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))

    async def _one(
        self, http: httpx.AsyncClient, process: str, port: int, index: int
    ) -> list[Sample]:
        response = await http.get(f"http://127.0.0.1:{port}/metrics")
        response.raise_for_status()
        return parse(response.text, process, time.time(), index)


def busy_share(
    busy: list[tuple[float, float]], window: tuple[float, float] | None, cores: int
) -> float | None:
    """The share of the machine's cores busy between the first and the last round inside
    ``window`` (None with fewer than two)."""
    inside = [b for b in busy if window is None or window[0] <= b[0] <= window[1]]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, b0), (t1, b1) = inside[0], inside[-1]
    return round((b1 - b0) / ((t1 - t0) * cores), 3)


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def summarise(samples: Iterable[Sample], window: tuple[float, float] | None) -> dict[str, Any]:
    """Per process and subscription: the peak over every sample, and the median and mean of the
    samples inside ``window`` (the run's steady part; all samples when None or when none falls
    inside it)."""
    grouped: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        grouped.setdefault((s.process, s.consumer), []).append(s)
    out: dict[str, Any] = {}
    for (process, consumer), group in sorted(grouped.items()):
        inside = [s for s in group if window is None or window[0] <= s.at <= window[1]] or group
        flights = [s.in_flight for s in inside]
        out.setdefault(process, {})[consumer] = {
            "samples": len(group),
            "steady_samples": len(inside),
            "in_flight_peak": max(s.in_flight for s in group),
            "in_flight_median": _median(flights),
            "in_flight_mean": round(statistics.fmean(flights), 2),
            "held_peak": max(s.held for s in group),
            "held_median": _median([s.held for s in inside]),
        }
    return out


def _rounds(
    samples: Iterable[Sample], consumer: str, window: tuple[float, float] | None
) -> list[tuple[float, int]]:
    """(time, ``consumer``'s in-flight count summed over every process) per scrape round, in
    order: all replicas' slots in use at once."""
    rounds: dict[int, tuple[float, int]] = {}
    for s in samples:
        if s.consumer != consumer or (window and not window[0] <= s.at <= window[1]):
            continue
        at, total = rounds.get(s.scrape, (s.at, 0))
        rounds[s.scrape] = (min(at, s.at), total + s.in_flight)
    return [rounds[k] for k in sorted(rounds)]


def total_in_flight(
    samples: Iterable[Sample], consumer: str, window: tuple[float, float] | None
) -> float | None:
    """The mean over scrape rounds inside ``window`` of ``consumer``'s slots in use on all
    replicas together."""
    rounds = _rounds(samples, consumer, window)
    return round(statistics.fmean(t for _, t in rounds), 2) if rounds else None


def slot_seconds(samples: Iterable[Sample], consumer: str) -> float:
    """The in-flight count summed over replicas, integrated over the whole sampling (each round
    holds until the next): slot-seconds used, which divided by the executions run is how long
    each held a slot, whether or not the run was ever steady."""
    rounds = _rounds(samples, consumer, None)
    return sum(t * (later - at) for (at, t), (later, _) in itertools.pairwise(rounds))
