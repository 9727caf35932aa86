"""One execution's path through the services, hop by hop (issue 35, item 1): on an idle stack
started with ``INTERLOCK_LOG_LEVEL=info make up``, executions of ``refund-approval`` one at a
time (invoke, suspended, approve, completed, read on ``GET .../executions/{id}``), then each
service's log lines for them as a timeline: where each handler started and ended, counted from
the request that began the half (the invoke, then the decision). A gap between one handler's
end and the next one's start is time spent between the services (publish, broker, fetch); a
long handler is time spent in it (its store commands, the agent).

    INTERLOCK_LOG_LEVEL=info make up
    .venv/bin/python -m bench.timeline .infra/logs/services [executions] [background per second]

With a background rate, other executions (invoked, approved once suspended) run meanwhile at that
rate, so the same hops can be compared at 10% and at half of saturation.

The arithmetic (``hops``) is pure; ``main`` drives the stack."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"
BASE = "http://127.0.0.1:8000/api/v1/projects/demo"
POLL_SECONDS = 0.002
PAUSE_SECONDS = 1.0
"""Between executions, so each meets an idle stack."""


@dataclass(frozen=True)
class Hop:
    half: str
    """``invoke`` (to suspended) or ``decision`` (to completed)."""
    start_ms: float
    end_ms: float
    service: str
    what: str


@dataclass(frozen=True)
class Run:
    execution_id: str
    invoked: float
    suspended_seen: float
    decided: float
    completed_seen: float


def hops(run: Run, lines: Iterable[tuple[str, dict[str, Any]]]) -> list[Hop]:
    """The log lines of ``run``'s execution (service, parsed JSON line) as hops, in order of
    their start: a line with ``duration_ms`` (a handled event) started that long before it was
    written; any other line is an instant."""
    found: list[Hop] = []
    for service, line in lines:
        if line.get("execution_id") != run.execution_id or "timestamp" not in line:
            continue
        end = datetime.fromisoformat(str(line["timestamp"]).replace("Z", "+00:00")).timestamp()
        start = end - float(line.get("duration_ms") or 0) / 1000
        half, origin = ("invoke", run.invoked) if start < run.decided else ("decision", run.decided)
        what = str(line.get("topic") or line.get("event"))
        if line.get("event") != "event.handled" and line.get("topic"):
            what = f"{line.get('event')} ({line['topic']})"
        found.append(Hop(half, 1000 * (start - origin), 1000 * (end - origin), service, what))
    return sorted(found, key=lambda h: (h.half != "invoke", h.start_ms))


def render(run: Run, found: list[Hop]) -> str:
    rows = [f"execution {run.execution_id}", "| half | from ms | to ms | service | what |"]
    rows.append("| --- | --- | --- | --- | --- |")
    for hop in found:
        rows.append(
            f"| {hop.half} | {hop.start_ms:.1f} | {hop.end_ms:.1f} | {hop.service} | {hop.what} |"
        )
    rows.append(
        f"client: suspended seen at {1000 * (run.suspended_seen - run.invoked):.1f} ms,"
        f" completed seen {1000 * (run.completed_seen - run.decided):.1f} ms after the decision"
    )
    return "\n".join(rows)


async def _until(
    client: httpx.AsyncClient, execution_id: str, wanted: set[str], poll: float = POLL_SECONDS
) -> Any:
    while True:
        answer = await client.get(
            f"{BASE}/executions/{execution_id}", params={"workspace_id": "default"}
        )
        body = answer.json()
        if body["status"] in wanted:
            return time.time(), body
        await asyncio.sleep(poll)


async def _one_in_background(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        f"{BASE}/workspaces/default/invoke",
        json={"agent": "refund-approval", "message": f"Refund claim CLM-4821 ({time.time()})"},
    )
    if answer.status_code != 202:
        return  # refused (the key's rate limit, say): the measured ones are what counts
    execution_id = answer.json()["execution_id"]
    _, body = await _until(client, execution_id, {"suspended", "error", "completed"}, 0.02)
    if body["status"] == "suspended":
        await client.post(
            f"{BASE}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={"decision": "approve"},
        )


async def _background(client: httpx.AsyncClient, rate: float) -> None:
    started: set[asyncio.Task[None]] = set()
    while True:
        task = asyncio.create_task(_one_in_background(client))
        started.add(task)
        task.add_done_callback(started.discard)
        await asyncio.sleep(1 / rate)


async def _drive(count: int, rate: float = 0.0) -> list[Run]:
    runs = []
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        background = asyncio.create_task(_background(client, rate)) if rate > 0 else None
        for _ in range(count):
            await asyncio.sleep(PAUSE_SECONDS)
            invoked = time.time()
            answer = await client.post(
                f"{BASE}/workspaces/default/invoke",
                json={"agent": "refund-approval", "message": f"Refund claim CLM-4821 ({invoked})"},
            )
            if answer.status_code != 202:
                raise RuntimeError(f"invoke answered {answer.status_code}: {answer.text}")
            execution_id = answer.json()["execution_id"]
            seen, body = await _until(client, execution_id, {"suspended", "error", "completed"})
            if body["status"] != "suspended":
                raise RuntimeError(f"{execution_id} ended {body['status']} before its review")
            await asyncio.sleep(PAUSE_SECONDS / 2)
            decided = time.time()
            await client.post(
                f"{BASE}/executions/{execution_id}/resume",
                params={"workspace_id": "default"},
                json={"decision": "approve"},
            )
            done, _ = await _until(client, execution_id, {"completed", "error"})
            runs.append(Run(execution_id, invoked, seen, decided, done))
        if background is not None:
            background.cancel()
    return runs


def _log_lines(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    lines = []
    for path in sorted(folder.glob("*.log")):
        for text in path.read_text().splitlines():
            if '"execution_id"' in text:
                try:
                    lines.append((path.stem, json.loads(text)))
                except ValueError:
                    continue
    return lines


def main() -> None:
    folder = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    runs = asyncio.run(_drive(count, rate))
    time.sleep(2)  # the services' last lines reach their files
    lines = _log_lines(folder)
    for run in runs[-3:]:
        print(render(run, hops(run, lines)), end="\n\n")
    first = [1000 * (r.suspended_seen - r.invoked) for r in runs[1:]]
    second = [1000 * (r.completed_seen - r.decided) for r in runs[1:]]
    print(
        f"medians over {len(first)} (the first left out: a cold stack):"
        f" invoke -> suspended seen {statistics.median(first):.1f} ms,"
        f" decision -> completed seen {statistics.median(second):.1f} ms"
    )


if __name__ == "__main__":
    main()
