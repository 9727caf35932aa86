"""Figure 8: the same run on a store holding a few executions, then a large history."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from bench import analysis, prefill, procstats
from bench.figures import Raw, one_run, store_summary
from bench.modes import Mode
from bench.targets import Distributed


async def history(
    target: Distributed, mode: Mode, extra_pids: dict[str, int], raw: Raw
) -> dict[str, Any]:
    """Figure 8: the same low-rate run on a store holding only a few executions, then again with
    ``mode.history_prefill`` finished executions stored (copies of one the services ran, made in
    bulk: see bench/prefill.py): store commands, decision -> next step, store CPU."""
    out: dict[str, Any] = {
        "rate_per_second": mode.history_rate,
        "executions_per_run": mode.history_count,
    }
    empty, template = await _history_phase(target, mode, extra_pids, raw, "empty")
    out["empty"] = empty
    if template is None:
        return out
    out["empty"]["stored_executions"] = await _stored_executions(target)
    out["prefill"] = await prefill.clone_finished(
        target.mongodb, target.cluster.database, template, mode.history_prefill
    )
    # A bulk load leaves work behind: PostgreSQL's autovacuum wakes up to a minute later and
    # vacuums and analyzes the new rows (2.5 s of CPU after 20,000 executions, measured, most
    # of it inside the next phase). A history accumulated over weeks has had that done as it
    # grew, so it is done now, and waited out, rather than charged to the executions measured
    # next.
    out["prefill"]["vacuumed"] = await _vacuum(extra_pids)
    out["prefill"]["settled_seconds"] = await _store_settled(extra_pids)
    out["history"], _ = await _history_phase(target, mode, extra_pids, raw, "history")
    out["history"]["stored_executions"] = await _stored_executions(target)
    return out


SETTLED_CPU_SHARE = 0.05
"""The store is settled when it uses less than this share of one core..."""


SETTLED_WINDOWS = 3
"""...over this many consecutive one-second windows."""


SETTLE_TIMEOUT_SECONDS = 300.0


async def _vacuum(extra_pids: dict[str, int]) -> bool:
    """``VACUUM ANALYZE`` the PostgreSQL under a local FerretDB (with ``psql``); False when the
    store is something else, or it could not be done."""
    ferretdb = extra_pids.get(procstats.FERRETDB)
    url = procstats.postgresql_url(ferretdb) if ferretdb else None
    if url is None:
        return False
    try:
        proc = await asyncio.create_subprocess_exec(
            "psql", url, "--quiet", "--command", "VACUUM ANALYZE",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    except FileNotFoundError:
        return False
    _, err = await proc.communicate()
    if proc.returncode != 0:
        failure = err.decode(errors="replace")[-300:]
        print(f"bench: VACUUM ANALYZE failed: {failure}", file=sys.stderr)
        return False
    return True


async def _store_settled(extra_pids: dict[str, int]) -> float | None:
    """Wait until the store's processes are idle; how long that took (None when the store is
    not on this machine, or did not settle within the timeout)."""
    store = {n: p for n, p in extra_pids.items() if n in (procstats.FERRETDB, procstats.POSTGRESQL)}
    if not store:
        return None
    began = time.monotonic()
    quiet = 0
    while time.monotonic() - began < SETTLE_TIMEOUT_SECONDS:
        meter = procstats.CpuMeter.start(store)
        await asyncio.sleep(1.0)
        per_process = meter.stop()["per_process_seconds"]
        assert isinstance(per_process, dict)
        used = sum(per_process.values())
        quiet = quiet + 1 if used < SETTLED_CPU_SHARE else 0
        if quiet >= SETTLED_WINDOWS:
            return round(time.monotonic() - began, 1)
    return None


async def _history_phase(
    target: Distributed, mode: Mode, extra_pids: dict[str, int], raw: Raw, phase: str
) -> tuple[dict[str, Any], str | None]:
    run = await one_run(
        target, rate=mode.history_rate, count=mode.history_count, message="bench",
        mode=mode, extra_pids=extra_pids,
    )  # fmt: skip
    raw.append({"figure": "history", "phase": phase, **run.raw()})
    done = run.completed()
    summaries, _ = analysis.latencies(done)
    return {
        "completed": len(done),
        "failures": run.failures()[:5],
        "cpu_ms_per_execution": analysis.cpu_per_execution(run.cpu, len(done)),
        **store_summary(run),
        "decision_to_next_step": summaries["decision_to_next_step"],
        "decision_to_completed": summaries["decision_to_completed"],
    }, (done[0].execution_id if done else None)


async def _stored_executions(target: Distributed) -> int | None:
    """How many executions the store holds (their heads), when it still keeps heads."""
    collections = (await target.storage())["collections"]
    heads = collections.get("executions")
    return None if heads is None else int(heads["documents"])
