"""Section 12's concurrent run through the native API (bench/native_workload.py): an execution
is an invoke, its suspension, an approval and its completion, each status taken from what the
watcher saw, early or late; a failed one is recorded, not timed; the routes' cost is divided by
it on the page and in issue 35's targets. Nothing here opens a socket; no time is asserted."""

from __future__ import annotations

import asyncio
from typing import Any

from bench import goals, native_workload
from bench.native_workload import StatusWaits
from bench.peers import sdk_workload
from bench.report.agent_server import sdk_section


class FakeApi:
    """Answers as the gateway would and announces the statuses the services would publish:
    ``early`` before the request that causes them returns, otherwise just after."""

    def __init__(self, waits: StatusWaits, *, early: bool = False, ends: str = "completed") -> None:
        self.waits = waits
        self.early = early
        self.ends = ends
        self.calls: list[tuple[str, str]] = []
        self.in_flight = self.most_in_flight = 0

    def _announce(self, execution_id: str, status: str) -> None:
        if self.early:
            self.waits.saw(execution_id, status, 0.0)
        else:
            asyncio.get_running_loop().call_soon(self.waits.saw, execution_id, status, 0.0)

    async def invoke(self, message: str) -> str:
        execution_id = f"ex-{len(self.calls)}"
        self.calls.append(("invoke", message))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.waits.saw(execution_id, "running", 0.0)
        self._announce(execution_id, "suspended")
        return execution_id

    async def approve(self, execution_id: str) -> None:
        self.calls.append(("approve", execution_id))
        await asyncio.sleep(0)
        self._announce(execution_id, self.ends)
        self.in_flight -= 1


async def test_an_execution_is_an_invoke_its_suspension_an_approval_and_its_completion() -> None:
    for early in (False, True):
        waits = StatusWaits()
        api = FakeApi(waits, early=early)
        timing = await native_workload.one(api, waits)
        assert timing.error is None, timing.error
        assert api.calls == [("invoke", sdk_workload.MESSAGE), ("approve", "ex-0")]
        halves = timing.halves()
        assert halves["invoke_to_interrupted"] is not None
        assert halves["resume_to_completed"] is not None


async def test_an_execution_that_does_not_complete_is_a_failure_not_a_timing() -> None:
    waits = StatusWaits()
    timing = await native_workload.one(FakeApi(waits, ends="error"), waits)
    assert timing.completed is None and "did not complete: error" in (timing.error or "")
    assert sdk_workload.summary([timing])["completed"] == 0


async def test_the_concurrent_run_keeps_the_given_number_in_flight_and_forgets_what_ended() -> None:
    waits = StatusWaits()
    api = FakeApi(waits)
    timings = await native_workload.concurrent(api, waits, 9, 3)
    assert len(timings) == 9 and not sdk_workload.failures(timings)
    assert api.most_in_flight == 3
    assert waits._seen == {}  # nothing kept per finished execution


async def test_a_wait_takes_the_first_wanted_status_seen_before_or_after_it_began() -> None:
    waits = StatusWaits()
    waits.saw("a", "running", 0.0)
    waits.saw("a", "suspended", 0.0)
    assert await waits.until("a", native_workload.SUSPENDED_OR_ENDED) == "suspended"
    later = asyncio.ensure_future(waits.until("b", frozenset({"completed"})))
    await asyncio.sleep(0)
    waits.saw("b", "running", 0.0)  # not wanted: the wait goes on
    await asyncio.sleep(0)
    assert not later.done()
    waits.saw("b", "completed", 0.0)
    assert await later == "completed"


def _concurrent(per_second: float, cpu: float) -> dict[str, Any]:
    return {
        "in_flight": 10,
        "per_second": per_second,
        "cpu_ms_per_execution": cpu,
        "completed": 40,
        "executions": 40,
    }


def _figures(native: dict[str, Any] | None) -> dict[str, Any]:
    interlock: dict[str, Any] = {"concurrent": _concurrent(8.0, 120.0)}
    if native is not None:
        interlock["native"] = native
    return {
        "sdk_workload": {
            "sizes": {"sequential": 8, "concurrent": 40, "in_flight": 10},
            "interlock": interlock,
            "agent_server": {"error": "not run"},
            "ratios": sdk_workload.ratios(interlock, None),
            "native_ratios": sdk_workload.native_ratios(interlock),
        }
    }


def test_the_routes_cost_is_divided_by_the_native_apis_on_the_page_and_in_the_targets() -> None:
    figures = _figures({"concurrent": _concurrent(10.0, 100.0)})
    assert figures["sdk_workload"]["native_ratios"] == {
        "per_second": 0.8,
        "cpu_ms_per_execution": 1.2,
    }
    text = "\n".join(sdk_section({"figures": figures}))
    assert (
        "| Interlock, the same services, native API (the concurrent run only) | 10 | 10.00 |"
        in (text)
    )
    assert "| concurrent CPU per execution | 1.200x |" in text
    targets = {t["name"]: t for t in goals.evaluate(figures)}
    cpu = targets["langgraph-sdk CPU per execution vs the native API (same services, same run)"]
    assert (cpu["measured"], cpu["met"]) == (1.2, True)
    rate = targets["langgraph-sdk executions/s at 10 in flight, twice fef8514's 6.22"]
    assert (rate["measured"], rate["met"], rate["off_by"]) == (8.0, False, 1.55)


def test_a_native_run_that_failed_is_shown_as_not_measured() -> None:
    figures = _figures({"error": "HTTPStatusError('503')"})
    text = "\n".join(sdk_section({"figures": figures}))
    assert "native API (the concurrent run only) | not measured: `HTTPStatusError('503')`" in text
    targets = {t["name"]: t for t in goals.evaluate(figures)}
    cpu = targets["langgraph-sdk CPU per execution vs the native API (same services, same run)"]
    assert cpu["measured"] is None and cpu["met"] is None
    old = _figures(None)  # a summary from before the native run: no row, no ratios
    assert "native API" not in "\n".join(sdk_section({"figures": old}))
