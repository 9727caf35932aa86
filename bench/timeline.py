"""One execution's path through the services, hop by hop (issue 35, item 1): on an idle stack
started with ``INTERLOCK_LOG_LEVEL=info make up``, executions of ``refund-approval`` one at a
time (invoke, suspended, approve, completed, read on ``GET .../executions/{id}``), then each
service's log lines for them as a timeline: where each handler started and ended, counted from
the request that began the half (the invoke, then the decision). A gap between one handler's
end and the next one's start is time spent between the services (publish, broker, fetch); a
long handler is time spent in it (its store commands, the agent).

    INTERLOCK_LOG_LEVEL=info make up
    source .infra/env && .venv/bin/python -m bench.timeline .infra/logs/services [executions] \
        [background per second]

With a background rate, other executions (invoked, approved once suspended) run meanwhile at that
rate, so the same hops can be compared at 10% and at half of saturation.

The driver sees statuses on ``execution.status`` (as the benchmark's harness does), not by polling
the API: a GET every 2 ms was three store commands each, 1,500 a second, which slowed every
store command on the timeline it measured.

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

from bench.watchers import KafkaStatusWatcher
from shared.settings import CommonSettings

KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"
BASE = "http://127.0.0.1:8000/api/v1/projects/demo"
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


class Statuses:
    """The statuses ``execution.status`` announces, as they come (bench/watchers.py)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], float] = {}
        self._changed = asyncio.Event()
        settings = CommonSettings()  # the broker and topics of `make up`, from the environment
        self._watcher = KafkaStatusWatcher(
            settings.kafka_bootstrap_servers, settings.topics.status, settings.topic_partitions
        )

    async def start(self) -> None:
        await self._watcher.start(self._saw)

    def _saw(self, execution_id: str, status: str, at: float) -> None:
        self._seen.setdefault((execution_id, status), at)
        self._changed.set()

    async def until(self, execution_id: str, wanted: set[str]) -> tuple[float, str]:
        """When ``execution_id`` was first seen in one of ``wanted``, and which."""
        while True:
            found = [(at, s) for (e, s), at in self._seen.items() if e == execution_id]
            reached = sorted((at, s) for at, s in found if s in wanted)
            if reached:
                return reached[0]
            self._changed.clear()
            await self._changed.wait()

    async def stop(self) -> None:
        await self._watcher.stop()


async def _one_in_background(client: httpx.AsyncClient, statuses: Statuses) -> None:
    answer = await client.post(
        f"{BASE}/workspaces/default/invoke",
        json={"agent": "refund-approval", "message": f"Refund claim CLM-4821 ({time.time()})"},
    )
    if answer.status_code != 202:
        return  # refused (the key's rate limit, say): the measured ones are what counts
    execution_id = answer.json()["execution_id"]
    _, status = await statuses.until(execution_id, {"suspended", "error", "completed"})
    if status == "suspended":
        await client.post(
            f"{BASE}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={"decision": "approve"},
        )


async def _background(client: httpx.AsyncClient, statuses: Statuses, rate: float) -> None:
    started: set[asyncio.Task[None]] = set()
    while True:
        task = asyncio.create_task(_one_in_background(client, statuses))
        started.add(task)
        task.add_done_callback(started.discard)
        await asyncio.sleep(1 / rate)


async def _drive(count: int, rate: float = 0.0) -> list[Run]:
    runs = []
    headers = {"Authorization": f"Bearer {KEY}"}
    statuses = Statuses()
    await statuses.start()
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        background = asyncio.create_task(_background(client, statuses, rate)) if rate > 0 else None
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
            seen, status = await statuses.until(execution_id, {"suspended", "error", "completed"})
            if status != "suspended":
                raise RuntimeError(f"{execution_id} ended {status} before its review")
            await asyncio.sleep(PAUSE_SECONDS / 2)
            decided = time.time()
            await client.post(
                f"{BASE}/executions/{execution_id}/resume",
                params={"workspace_id": "default"},
                json={"decision": "approve"},
            )
            done, _ = await statuses.until(execution_id, {"completed", "error"})
            runs.append(Run(execution_id, invoked, seen, decided, done))
        if background is not None:
            background.cancel()
    await statuses.stop()
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
