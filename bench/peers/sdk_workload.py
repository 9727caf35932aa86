"""One workload for every server that speaks LangGraph's Agent Server API: ``langgraph-sdk`` as
an application would use it, against Interlock's LangGraph routes and LangGraph's own Agent
Server alike, so the two are held to exactly the same client calls.

An execution is a thread, a run that ends at the bench agent's ``interrupt(...)`` and a run that
resumes it with ``Command(resume={"decision": "approve"})`` to its end, each awaited with
``runs.wait``. Each half is timed by the client: invoke -> interrupted, resume -> completed.
Sequential: one execution after another (each half's latency with nothing else running).
Concurrent: a fixed number in flight, each worker starting its next execution when one ends
(closed loop: executions per second at that concurrency). ``summary``, ``throughput`` and
``ratios`` are pure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from bench import hdr

ASSISTANT = "bench-pipeline"
"""Interlock's assistant id is the agent's name; the Agent Server's is the graph id it is
registered under (``bench.peers.agent_server`` registers the same name)."""
MESSAGE = "bench"
INPUT: dict[str, Any] = {"messages": [{"role": "user", "content": MESSAGE}]}
RESUME: dict[str, Any] = {"decision": "approve"}
"""Interlock's decision shape, which the bench agent reads: both servers get the same value."""
HALVES = ("invoke_to_interrupted", "resume_to_completed")
CpuMeter = Callable[[], float | None]
"""CPU seconds used so far by the server's processes (None if they cannot be read)."""


@dataclass(frozen=True)
class Sizes:
    sequential: int
    """Executions one after another."""
    concurrent: int
    """Executions of the concurrent run..."""
    in_flight: int
    """...with this many in flight at once."""


@dataclass
class Timing:
    """One execution as the client saw it (``time.perf_counter`` seconds)."""

    started: float
    interrupted: float | None = None
    resumed: float | None = None
    """When the resume was sent (the second half's origin)."""
    completed: float | None = None
    error: str | None = None

    def halves(self) -> dict[str, float | None]:
        first = None if self.interrupted is None else self.interrupted - self.started
        second = None
        if self.completed is not None and self.resumed is not None:
            second = self.completed - self.resumed
        return dict(zip(HALVES, (first, second), strict=True))


class Unexpected(RuntimeError):
    """The server answered, but not as the agent's shape says it must."""


async def one(client: LangGraphClient, assistant: str = ASSISTANT) -> Timing:
    """One execution; its failure is recorded in the timing, not raised."""
    record = Timing(started=time.perf_counter())
    try:
        thread = await client.threads.create()
        thread_id = thread["thread_id"]
        first = await client.runs.wait(thread_id, assistant, input=INPUT)
        record.interrupted = time.perf_counter()
        if not isinstance(first, dict) or "__interrupt__" not in first:
            raise Unexpected(f"the first run did not stop at the interrupt: {_brief(first)}")
        record.resumed = time.perf_counter()
        second = await client.runs.wait(thread_id, assistant, command={"resume": RESUME})
        record.completed = time.perf_counter()
        if not isinstance(second, dict) or "__interrupt__" in second or "__error__" in second:
            raise Unexpected(f"the resumed run did not complete: {_brief(second)}")
    except Exception as exc:  # reported with the figures: a failed execution is not timed
        record.completed = None
        record.error = repr(exc)[:300]
    return record


def _brief(value: Any) -> str:
    return repr(value)[:200]


async def sequential(
    client: LangGraphClient, count: int, assistant: str = ASSISTANT
) -> list[Timing]:
    return [await one(client, assistant) for _ in range(count)]


async def closed_loop(
    run_one: Callable[[], Awaitable[Timing]], count: int, in_flight: int
) -> list[Timing]:
    """``count`` executions, ``in_flight`` workers each running one after another."""
    left = iter(range(count))
    timings: list[Timing] = []

    async def worker() -> None:
        for _ in left:
            timings.append(await run_one())

    await asyncio.gather(*(worker() for _ in range(min(in_flight, count))))
    return timings


async def concurrent(
    client: LangGraphClient, count: int, in_flight: int, assistant: str = ASSISTANT
) -> list[Timing]:
    """``count`` executions through the SDK, ``in_flight`` at once."""
    return await closed_loop(lambda: one(client, assistant), count, in_flight)


def failures(timings: Sequence[Timing]) -> list[str]:
    return [t.error or "not completed" for t in timings if t.completed is None or t.error]


def summary(timings: Sequence[Timing]) -> dict[str, Any]:
    """Per half: p50 / p99 / p99.9 / max / mean in ms over the completed executions (with few
    executions p99 is the slowest one, not a tail estimate)."""
    done = [t for t in timings if t.completed is not None and not t.error]
    out: dict[str, Any] = {
        "executions": len(timings),
        "completed": len(done),
        "failures": failures(timings)[:5],
    }
    for half in HALVES:
        histogram = hdr.new_histogram()
        for t in done:
            seconds = t.halves()[half]
            if seconds is not None:
                hdr.record_seconds(histogram, seconds)
        out[half] = hdr.summary(histogram)
    return out


def throughput(
    timings: Sequence[Timing], in_flight: int, cpu_seconds: float | None = None
) -> dict[str, Any]:
    """The concurrent run: completed executions per second from the first start to the last
    completion, the halves' latencies under that load, and the server's CPU per execution."""
    out = summary(timings)
    out["in_flight"] = in_flight
    ends = [t.completed for t in timings if t.completed is not None and not t.error]
    if not ends:
        return {**out, "seconds": None, "per_second": None, "cpu_ms_per_execution": None}
    seconds = max(ends) - min(t.started for t in timings)
    out["seconds"] = round(seconds, 3)
    out["per_second"] = round(len(ends) / seconds, 3) if seconds > 0 else None
    out["cpu_ms_per_execution"] = (
        None if cpu_seconds is None else round(cpu_seconds * 1000 / len(ends), 3)
    )
    return out


def _get(data: dict[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _ratio(ours: Any, theirs: Any) -> float | None:
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float) or not theirs:
        return None
    return round(ours / theirs, 3)


RATIOS: dict[str, tuple[str, ...]] = {
    "sequential_invoke_p50": ("sequential", "invoke_to_interrupted", "p50_ms"),
    "sequential_invoke_p99": ("sequential", "invoke_to_interrupted", "p99_ms"),
    "sequential_resume_p50": ("sequential", "resume_to_completed", "p50_ms"),
    "sequential_resume_p99": ("sequential", "resume_to_completed", "p99_ms"),
    "concurrent_per_second": ("concurrent", "per_second"),
    "concurrent_cpu_per_execution": ("concurrent", "cpu_ms_per_execution"),
}
"""Each ratio and where its figure is in a system's result."""


def ratios(interlock: dict[str, Any] | None, peer: dict[str, Any] | None) -> dict[str, Any]:
    """Interlock divided by the peer, as section 5's ratios: latency and CPU below 1 are
    Interlock's advantage, executions per second above 1; None where either is missing."""
    return {
        name: _ratio(_get(interlock, *path), _get(peer, *path)) for name, path in RATIOS.items()
    }


NATIVE_RATIOS = ("per_second", "cpu_ms_per_execution")
"""The concurrent run's figures held against the same run through the native API."""


def native_ratios(interlock: dict[str, Any] | None) -> dict[str, float | None]:
    """Interlock's LangGraph routes divided by its native API (``interlock["native"]``, the
    same concurrent run on the same services): what the routes add, 1.0 being nothing."""
    return {
        name: _ratio(
            _get(interlock, "concurrent", name), _get(interlock, "native", "concurrent", name)
        )
        for name in NATIVE_RATIOS
    }


def client_for(url: str, api_key: str | None) -> LangGraphClient:
    """The SDK's client exactly as an application builds it (``api_key`` goes as
    ``x-api-key``); None sends no key (and reads none from the environment)."""
    return get_client(url=url, api_key=api_key)


async def measure(
    url: str, api_key: str | None, sizes: Sizes, cpu: CpuMeter | None = None
) -> dict[str, Any]:
    """One warm-up execution (imports and connections paid before anything is timed), the
    sequential run, then the concurrent one, whose server CPU ``cpu`` reads."""
    client = client_for(url, api_key)
    try:
        warm = await one(client)
        if warm.error:
            raise RuntimeError(f"warm-up failed: {warm.error}")
        timings = await sequential(client, sizes.sequential)
        before = cpu() if cpu else None
        loaded = await concurrent(client, sizes.concurrent, sizes.in_flight)
        after = cpu() if cpu else None
        used = None if before is None or after is None else after - before
        return {
            "sequential": summary(timings),
            "concurrent": throughput(loaded, sizes.in_flight, used),
            "raw": {
                "sequential": [asdict(t) for t in timings],
                "concurrent": [asdict(t) for t in loaded],
            },
        }
    finally:
        await client.aclose()
