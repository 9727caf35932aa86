"""LangGraph's Agent Server as a benchmark peer (section 12): the project it is given, how it is
started (offline), the lock its virtualenv is built from, the one langgraph-sdk workload driven
against a fake client, the figures' maths and the page's rows. Nothing here starts a server or
opens a socket; no time is asserted."""

from __future__ import annotations

import asyncio
import json
import re
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.client import AGENT
from bench.modes import MODES
from bench.peers import agent_server, sdk_workload
from bench.peers.sdk_workload import Timing
from bench.report.agent_server import sdk_section
from bench.report.page import render
from tests.e2e.cluster import REPO


def test_the_config_registers_the_agent_under_interlocks_name_from_the_generated_module(
    tmp_path: Path,
) -> None:
    path = agent_server.write_project(tmp_path)
    config = json.loads(path.read_text())
    assert config["graphs"] == {AGENT: f"./{agent_server.GRAPH_MODULE}:graph"}
    assert agent_server.GRAPH_ID == sdk_workload.ASSISTANT == AGENT
    # The module gives the bench agent compiled without a checkpointer: the server's own.
    graph = runpy.run_path(str(tmp_path / agent_server.GRAPH_MODULE))["graph"]
    assert graph.checkpointer is None
    assert {"prepare", "act"} <= set(graph.nodes)


def test_durable_steps_are_plain_calls_outside_interlock() -> None:
    from agents.bench_pipeline import stamp, work

    assert work(3) == "done-3"
    assert isinstance(stamp("x"), float)


def test_the_server_starts_offline_with_this_checkout_importable() -> None:
    base = {
        "PATH": "/usr/bin",
        "PYTHONPATH": "/elsewhere",
        "LANGSMITH_API_KEY": "lsv2-secret",
        "LANGCHAIN_API_KEY": "secret",
        "LANGSMITH_ENDPOINT": "https://example.invalid",
        "LANGSMITH_TRACING": "true",
        "VIRTUAL_ENV": str(REPO / ".venv"),
    }
    env = agent_server.environment(base, REPO)
    assert env["LANGGRAPH_NO_VERSION_CHECK"] == "true"
    assert env["LANGGRAPH_CLI_NO_ANALYTICS"] == "1"
    assert env["LANGSMITH_TRACING"] == "false"
    assert not {"LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGSMITH_ENDPOINT"} & set(env)
    assert "VIRTUAL_ENV" not in env  # the project's virtualenv is not the server's
    assert env["PYTHONPATH"].split(":") == [str(REPO), "/elsewhere"]
    assert env["PATH"] == "/usr/bin"


def test_the_command_is_langgraph_dev_on_loopback_with_a_worker_per_run_in_flight(
    tmp_path: Path,
) -> None:
    config = tmp_path / "langgraph.json"
    argv = agent_server.command(tmp_path / "venv", config, 8123, 10)
    assert argv[:2] == [str(tmp_path / "venv" / "bin" / "langgraph"), "dev"]
    assert {"--no-browser", "--no-reload"} <= set(argv)
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert options == {
        "--host": "127.0.0.1",
        "--port": "8123",
        "--config": str(config),
        "--n-jobs-per-worker": "10",
    }


def _pins(text: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.\-]+", line) for line in lines)
    return {n.lower().replace("_", "-"): v for n, v in (line.split("==") for line in lines)}


def test_the_lock_pins_every_package_and_runs_the_agent_on_the_projects_langgraph() -> None:
    peer = _pins(agent_server.LOCK.read_text())
    assert peer["langgraph-api"] == agent_server.VERSION
    assert {"langgraph-cli", "langgraph-runtime-inmem"} <= set(peer)
    project = _pins(
        "\n".join(
            line
            for line in (REPO / "constraints.txt").read_text().splitlines()
            if "==" in line and not line.startswith(("#", "-"))
        )
    )
    for name in ("langgraph", "langgraph-checkpoint", "langchain-core", "langchain", "pydantic"):
        assert peer[name] == project[name], name


def test_the_virtualenv_is_built_once_per_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock, venv = tmp_path / "lock.txt", tmp_path / "venv"
    lock.write_text("langgraph-api==0.16.7\n")
    calls: list[list[str]] = []

    def run(argv: list[str], check: bool) -> None:
        calls.append(argv)
        Path(argv[-1] if argv[-2] == "venv" else venv).mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(subprocess, "run", run)
    assert agent_server.ensure_venv(venv, lock) == venv
    assert calls[0][1:] == ["-m", "venv", str(venv)]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(lock)]
    assert calls[1] == pip
    agent_server.ensure_venv(venv, lock)
    assert len(calls) == 2  # the same lock: nothing installed again
    lock.write_text("langgraph-api==0.16.8\n")
    agent_server.ensure_venv(venv, lock)
    assert len(calls) == 4


class FakeServer:
    """``threads`` and ``runs`` as langgraph-sdk's client has them, answering as the bench
    agent does: the first run stops at the interrupt, the resumed one ends."""

    def __init__(self, *, interrupt: bool = True) -> None:
        self.interrupt = interrupt
        self.threads = self
        self.runs = self
        self.in_flight = 0
        self.most_in_flight = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.closed = False

    async def create(self) -> dict[str, Any]:
        return {"thread_id": f"t{len(self.calls)}"}

    async def wait(self, thread_id: str, assistant: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((assistant, kwargs))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        if "command" in kwargs:
            return {"decision": kwargs["command"]["resume"]["decision"]}
        return {"__interrupt__": [{"value": {}}]} if self.interrupt else {"messages": []}

    async def aclose(self) -> None:
        self.closed = True


async def test_an_execution_is_two_waits_the_second_resuming_with_the_decision() -> None:
    server = FakeServer()
    timing = await sdk_workload.one(server)  # type: ignore[arg-type]
    assert timing.error is None and timing.completed is not None
    (first_assistant, first), (second_assistant, second) = server.calls
    assert first_assistant == second_assistant == "bench-pipeline"
    assert first == {"input": {"messages": [{"role": "user", "content": "bench"}]}}
    assert second == {"command": {"resume": {"decision": "approve"}}}


async def test_a_run_that_does_not_stop_at_the_interrupt_is_a_failure_not_a_timing() -> None:
    timing = await sdk_workload.one(FakeServer(interrupt=False))  # type: ignore[arg-type]
    assert timing.completed is None and "did not stop at the interrupt" in (timing.error or "")
    assert sdk_workload.summary([timing])["completed"] == 0


async def test_the_concurrent_run_keeps_the_given_number_in_flight() -> None:
    server = FakeServer()
    timings = await sdk_workload.concurrent(server, 9, 3)  # type: ignore[arg-type]
    assert len(timings) == 9 and not sdk_workload.failures(timings)
    assert server.most_in_flight == 3
    assert len(await sdk_workload.sequential(server, 2)) == 2  # type: ignore[arg-type]


def _timing(start: float, invoke: float, resume: float) -> Timing:
    return Timing(
        started=start,
        interrupted=start + invoke,
        resumed=start + invoke,
        completed=start + invoke + resume,
    )


def test_the_summary_is_per_half_over_completed_executions() -> None:
    timings = [_timing(0, 0.010, 0.020), _timing(1, 0.030, 0.040), _timing(2, 0.020, 0.030)]
    timings.append(Timing(started=3, error="RemoteProtocolError()"))
    out = sdk_workload.summary(timings)
    assert (out["executions"], out["completed"]) == (4, 3)
    assert out["failures"] == ["RemoteProtocolError()"]
    assert out["invoke_to_interrupted"]["p50_ms"] == pytest.approx(20, rel=1e-3)
    assert out["invoke_to_interrupted"]["p99_ms"] == pytest.approx(30, rel=1e-3)
    assert out["resume_to_completed"]["p50_ms"] == pytest.approx(30, rel=1e-3)


def test_throughput_is_completions_from_first_start_to_last_end_with_cpu_per_execution() -> None:
    timings = [_timing(10.0, 0.5, 0.5), _timing(10.5, 0.5, 0.5), _timing(11.0, 0.5, 1.0)]
    out = sdk_workload.throughput(timings, in_flight=2, cpu_seconds=0.3)
    assert out["seconds"] == 2.5 and out["per_second"] == 1.2
    assert out["cpu_ms_per_execution"] == 100.0 and out["in_flight"] == 2
    none = sdk_workload.throughput([Timing(started=0, error="x")], in_flight=1)
    assert none["per_second"] is None and none["cpu_ms_per_execution"] is None


def _system(invoke: float, resume: float, per_second: float) -> dict[str, Any]:
    return {
        "sequential": {
            "invoke_to_interrupted": {"p50_ms": invoke, "p99_ms": invoke * 2},
            "resume_to_completed": {"p50_ms": resume, "p99_ms": resume * 2},
        },
        "concurrent": {"per_second": per_second, "cpu_ms_per_execution": 20.0},
    }


def test_ratios_are_interlock_over_the_agent_server_and_none_where_one_is_missing() -> None:
    ours, theirs = _system(60, 30, 15), _system(1000, 1000, 5)
    ratios = sdk_workload.ratios(ours, theirs)
    assert ratios["sequential_invoke_p50"] == 0.06
    assert ratios["sequential_resume_p99"] == 0.03
    assert ratios["concurrent_per_second"] == 3.0
    assert ratios["concurrent_cpu_per_execution"] == 1.0
    missing = sdk_workload.ratios({"error": "404"}, theirs)
    assert set(missing) == set(sdk_workload.RATIOS) and not any(missing.values())


def _figure() -> dict[str, Any]:
    peer = _system(1000, 1000, 5)
    peer["concurrent"].update(in_flight=10, completed=50, executions=50)
    peer.update(version="0.16.7", jobs_per_worker=10, queue_poll_seconds=0.5, flush_seconds=10)
    return {
        "sizes": {"sequential": 10, "concurrent": 50, "in_flight": 10},
        "interlock": {"error": "HTTPStatusError('404 Not Found')"},
        "agent_server": peer,
        "ratios": sdk_workload.ratios(None, peer),
    }


def test_the_page_has_the_agent_server_rows_its_queue_polling_and_the_ratios() -> None:
    text = "\n".join(sdk_section({"figures": {"sdk_workload": _figure()}}))
    assert "## 12. One langgraph-sdk workload" in text
    assert "**Its queue polls for new runs every 0.5 s**" in text
    assert "| LangGraph Agent Server (`langgraph dev`, in-memory runtime) | 1,000.0 ms / " in text
    assert "| 10 | 5.00 |" in text  # in flight, executions/s
    assert "not measured: `HTTPStatusError('404 Not Found')`" in text
    assert "| concurrent executions/s | n/a |" in text
    assert sdk_section({"figures": {}}) == []  # a summary from before section 12


def test_every_mode_sizes_the_workload() -> None:
    for mode in MODES.values():
        assert 0 < mode.sdk_in_flight <= mode.sdk_concurrent
        assert mode.sdk_sequential > 0
    quick = MODES["quick"]
    # The Agent Server takes ~2 s an execution (two 0.5 s queue polls a half), in flight or
    # not: quick mode keeps its part near 30 s (quick mode had ~30-75 s left of its 10 minutes).
    assert quick.sdk_sequential * 2 + quick.sdk_concurrent * 2 / quick.sdk_in_flight <= 30


def test_the_published_summary_still_renders() -> None:
    summary = json.loads((REPO / "bench" / "results" / "quick" / "summary.json").read_text())
    assert "## 1. Throughput" in render(summary, "bench/results/quick/summary.json")
