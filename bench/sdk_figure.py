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

from bench import native_workload, procstats
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
    log(f"section 12: the same concurrent run through the native API ({_sizes_text(mode)})")
    try:
        native = await _native(target, mode, _cpu_of(pids), raw)
    except Exception as exc:  # recorded with its reason and shown on the page
        log(f"section 12: the native API not measured: {exc!r}")
        native = _failed(exc)
    return {"processes": sorted(pids), **result, "native": native}


async def _native(
    target: Distributed, mode: Mode, cpu: sdk_workload.CpuMeter, raw: Raw
) -> dict[str, Any]:
    """The concurrent run's executions through the native API, right after the SDK's on the
    same services (``bench/native_workload.py``): the cost the LangGraph routes are held to."""
    client = target.client()
    waits = native_workload.StatusWaits()
    watcher = target.watcher(client)
    await watcher.start(waits.saw)
    try:
        warm = await native_workload.one(client, waits)
        if warm.error:
            raise RuntimeError(f"warm-up failed: {warm.error}")
        before = cpu()
        loaded = await native_workload.concurrent(
            client, waits, mode.sdk_concurrent, mode.sdk_in_flight
        )
        after = cpu()
    finally:
        await watcher.stop()
        await client.aclose()
    used = None if before is None or after is None else after - before
    raw.append(
        {
            "figure": "sdk-workload",
            "system": "interlock-native",
            "concurrent": [asdict(t) for t in loaded],
        }
    )
    return {"concurrent": sdk_workload.throughput(loaded, mode.sdk_in_flight, used)}


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
        "native_ratios": sdk_workload.native_ratios(interlock),
    }


def _sizes_text(mode: Mode) -> str:
    return (
        f"{mode.sdk_sequential} sequential, {mode.sdk_concurrent} with {mode.sdk_in_flight}"
        " in flight"
    )
