"""Section 12 of the page: the one ``langgraph-sdk`` workload (``bench/peers/sdk_workload.py``)
against Interlock's LangGraph routes (separate processes, 1 sandbox) and against LangGraph's
Agent Server (``bench/peers/agent_server.py``), and Interlock's ratios to it.

A side that cannot be measured (the server will not install or start, the routes answer with an
error) is recorded with its reason and shown as such on the page: the other figures of the
session are not lost to it."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import procstats
from bench.modes import Mode
from bench.peers import agent_server, sdk_workload
from bench.targets import Distributed

Raw = list[dict[str, Any]]
Log = Callable[[str], None]


def sizes(mode: Mode) -> sdk_workload.Sizes:
    return sdk_workload.Sizes(mode.sdk_sequential, mode.sdk_concurrent, mode.sdk_in_flight)


def _cpu_of(pids: dict[str, int]) -> sdk_workload.CpuMeter:
    def cpu() -> float | None:
        seconds = [procstats.tree_cpu_seconds(pid) for pid in pids.values()]
        return None if any(s is None for s in seconds) else sum(s or 0.0 for s in seconds)

    return cpu


def _failed(exc: BaseException) -> dict[str, Any]:
    return {"error": repr(exc)[:500]}


async def interlock(target: Distributed, mode: Mode, raw: Raw, log: Log) -> dict[str, Any]:
    """The workload on the running target's LangGraph routes, its CPU that of the target's
    processes (Kafka's and the store's apart, not counted)."""
    url, key = target.langgraph_endpoint()
    pids = target.pids()
    log(f"section 12: the langgraph-sdk workload on Interlock ({_sizes_text(mode)})")
    try:
        result = await sdk_workload.measure(url, key, sizes(mode), _cpu_of(pids))
    except Exception as exc:  # recorded with its reason and shown on the page
        log(f"section 12: Interlock not measured: {exc!r}")
        return _failed(exc)
    raw.append({"figure": "sdk-workload", "system": "interlock", **result.pop("raw")})
    return {"processes": sorted(pids), **result}


async def agent_server_peer(mode: Mode, workdir: Path, raw: Raw, log: Log) -> dict[str, Any]:
    """The workload on a fresh ``langgraph dev``, with as many workers as runs in flight."""
    about = {
        "version": agent_server.VERSION,
        "jobs_per_worker": mode.sdk_in_flight,
        "queue_poll_seconds": agent_server.QUEUE_POLL_SECONDS,
        "flush_seconds": agent_server.FLUSH_SECONDS,
    }
    log(f"section 12: LangGraph's Agent Server's virtualenv ({agent_server.VENV})")
    try:
        await asyncio.to_thread(agent_server.ensure_venv)
    except (OSError, subprocess.CalledProcessError) as exc:
        log(f"section 12: the Agent Server could not be installed: {exc!r}")
        return {**about, **_failed(exc)}
    server = agent_server.AgentServer(workdir=workdir, jobs=mode.sdk_in_flight)
    try:
        log(f"section 12: the workload on LangGraph's Agent Server ({_sizes_text(mode)})")
        await server.start()
        result = await sdk_workload.measure(server.url, None, sizes(mode), server.cpu_seconds)
    except Exception as exc:  # recorded with its reason and shown on the page
        log(f"section 12: the Agent Server not measured: {exc!r} (log: {server.log})")
        return {**about, **_failed(exc)}
    finally:
        await asyncio.to_thread(server.stop)
    raw.append({"figure": "sdk-workload", "system": "agent-server", **result.pop("raw")})
    return {**about, **result}


def figure(mode: Mode, interlock: dict[str, Any] | None, peer: dict[str, Any]) -> dict[str, Any]:
    return {
        "sizes": asdict(sizes(mode)),
        "interlock": interlock or {"error": "not run"},
        "agent_server": peer,
        "ratios": sdk_workload.ratios(interlock, peer),
    }


def _sizes_text(mode: Mode) -> str:
    return (
        f"{mode.sdk_sequential} sequential, {mode.sdk_concurrent} with {mode.sdk_in_flight}"
        " in flight"
    )
