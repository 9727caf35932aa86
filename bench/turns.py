"""Figure 13: what one turn of a conversation costs as the conversation grows (issue 33, item 4:
the store keeps no cost growth with turns; turn 50 within 10% of turn 1).

Several conversations of the ``conversation`` agent (agents/conversation.py: LangGraph's
``MessagesState`` chat, answering without a model) are driven in lock step through the native
API: turn k of every conversation is sent at once (``POST .../invoke`` with its ``session_id``),
each followed to its end on the public ``execution.status`` topic (which costs the services
nothing), and the store commands every process counted, and the time it spent in them, are read
once they have settled (bench/commands.py). A window holds turn k of each conversation and
nothing else, so a turn's commands are the window's divided by the conversations. The services
run with their periodic sweeps out of the windows, as tests/e2e/test_store_commands.py runs
them; the notifier's delivery poll (at its longest, a minute) may still fall in one and is
counted apart (``turn_costs.PERIODIC``).

Then, paired rounds: one conversation's next turn and a new conversation's first, one request
at a time, alternating which goes first, so both kinds of turn meet the same machine (the lock
step's turn 1 and turn 50 are minutes apart, and other users' work comes and goes).

Last, every document of the figure's database (its own) is read back and charged to the turn
whose execution it names (``turn_costs.owner_of``): the bytes each turn left, by collection, its
checkpoint thread's (the head and what it archived) among them.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

import httpx
from pymongo import AsyncMongoClient

from bench import commands
from bench.client import BenchClient
from bench.modes import Mode
from bench.procstats import CpuMeter
from bench.targets import Distributed
from bench.turn_costs import (
    CHECKPOINT_HEADS,
    Paired,
    Sent,
    Window,
    document_bytes,
    owner_of,
    summarise,
)
from bench.watchers import TERMINAL

AGENT = "conversation"
SWEEPS_OUT_OF_THE_WINDOWS = {
    "INTERLOCK_DEADLINE_POLL_SECONDS": "3600",
    "INTERLOCK_METRICS_POLL_SECONDS": "3600",
    "INTERLOCK_CRON_POLL_SECONDS": "3600",
    "INTERLOCK_NOTIFICATION_POLL_SECONDS": "60",
}
"""The periodic sweeps as the command-count test sets them: once at start-up, then hourly (the
notifier's delivery poll cannot wait longer than a minute)."""
QUIET_SECONDS = 1.0
"""Counts unchanged this long after a window's last turn ended: every process is done with it."""


def message(turn: int) -> str:
    """What the user says at ``turn``: the same length every turn, so only the conversation
    grows (the agent's reply quotes every earlier message, as a chat model's context holds
    them)."""
    return f"message {turn:03d}"


class _Ends:
    """Each execution's end as ``execution.status`` shows it, seen before or after its invoke
    answered."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[tuple[str, float]]] = {}
        self._early: dict[str, tuple[str, float]] = {}

    def on_status(self, execution_id: str, status: str, seen: float) -> None:
        if status not in TERMINAL:
            return
        waiter = self._waiting.pop(execution_id, None)
        if waiter is None:
            self._early.setdefault(execution_id, (status, seen))
        elif not waiter.done():
            waiter.set_result((status, seen))

    def wait(self, execution_id: str) -> asyncio.Future[tuple[str, float]]:
        waiter: asyncio.Future[tuple[str, float]] = asyncio.get_running_loop().create_future()
        if execution_id in self._early:
            waiter.set_result(self._early.pop(execution_id))
        else:
            self._waiting[execution_id] = waiter
        return waiter


class _Driver:
    """Sends turns and follows them to their end; reads the commands once they settle."""

    def __init__(
        self,
        client: BenchClient,
        ends: _Ends,
        metrics: httpx.AsyncClient,
        ports: dict[str, int],
        timeout: float,
    ) -> None:
        self.client, self.ends, self.metrics, self.ports = client, ends, metrics, ports
        self.timeout = timeout

    async def turn(self, conversation: int, turn: int, session: str) -> Sent:
        sent = Sent(conversation, turn, time.time())
        try:
            sent.execution_id = await self.client.invoke(
                message(turn), agent=AGENT, session_id=session
            )
            sent.status, sent.ended_at = await asyncio.wait_for(
                self.ends.wait(sent.execution_id), self.timeout
            )
        except (httpx.HTTPError, TimeoutError) as exc:
            sent.status, sent.error = "failed", repr(exc)[:300]
        return sent

    async def settled(self) -> tuple[commands.Counts, commands.Seconds]:
        counts = await commands.settle(self.metrics, self.ports, quiet=QUIET_SECONDS, timeout=60)
        return counts, await commands.scrape_seconds(self.metrics, self.ports)


async def conversations(
    target: Distributed, mode: Mode, extra_pids: dict[str, int], raw: list[Any]
) -> dict[str, Any]:
    """Figure 13 on a running target started with ``SWEEPS_OUT_OF_THE_WINDOWS``."""
    client = target.client()
    pids = {**target.pids(), **extra_pids}
    ends = _Ends()
    watcher = target.watcher(client)
    run = uuid.uuid4().hex[:8]
    sessions = [f"bench-turns-{run}-{i}" for i in range(mode.turns_conversations)]
    windows: list[Window] = []
    paired: list[Paired] = []
    await watcher.start(ends.on_status)
    try:
        async with httpx.AsyncClient(timeout=10) as metrics:
            driver = _Driver(client, ends, metrics, target.metrics_ports(), mode.timeout)
            # First-time costs (the agent's version, indexes, a thread's first turns) paid here.
            for turn in (1, 2, 3):
                await driver.turn(-1, turn, f"bench-turns-{run}-warm-up")
            before = await driver.settled()
            for turn in range(1, mode.turns_count + 1):
                meter, began = CpuMeter.start(pids), time.monotonic()
                sent = await asyncio.gather(
                    *(driver.turn(i, turn, session) for i, session in enumerate(sessions))
                )
                cpu = {**meter.stop(), "cores": os.cpu_count()}
                cpu["wall_seconds"] = round(time.monotonic() - began, 3)
                window = Window(turn, list(sent), cpu=cpu)
                after = await driver.settled()
                window.counts = commands.diff(after[0], before[0])
                window.seconds = commands.diff_seconds(after[1], before[1])
                before = after
                windows.append(window)
                if any(s.status != "completed" for s in sent):
                    break  # a conversation that failed a turn cannot go on
            else:
                paired = await _paired(driver, mode, pids, sessions, run)
    finally:
        await watcher.stop()
        await client.aclose()
    ids = {
        s.execution_id: (s.conversation, s.turn)
        for s in [*(s for w in windows for s in w.sent), *(p.sent for p in paired)]
        if s.execution_id is not None
    }
    stored = await stored_bytes(target.mongodb, target.cluster.database, ids)
    raw.append(
        {
            "figure": "turns",
            "windows": [w.raw() for w in windows],
            "paired": [p.raw() for p in paired],
            "stored": stored,
        }
    )
    return {"agent": AGENT, **summarise(windows, paired, stored, mode.turns_conversations)}


async def _paired(
    driver: _Driver, mode: Mode, pids: dict[str, int], sessions: list[str], run: str
) -> list[Paired]:
    """``mode.turns_paired`` rounds of three requests one at a time: a new conversation's first
    turn and its second, and the next turn of one of the long conversations (each in turn),
    the long one first in every other round."""
    out: list[Paired] = []
    next_turn = dict.fromkeys(range(len(sessions)), mode.turns_count + 1)
    before = await driver.settled()
    for index in range(mode.turns_paired):
        long = index % len(sessions)
        fresh = f"bench-turns-{run}-new-{index}"
        requests = [
            ("first", -2 - index, 1, fresh),
            ("second", -2 - index, 2, fresh),
            ("later", long, next_turn[long], sessions[long]),
        ]
        next_turn[long] += 1
        for kind, conversation, turn, session in (
            requests[-1:] + requests[:-1] if index % 2 else requests
        ):
            meter, began = CpuMeter.start(pids), time.monotonic()
            sent = await driver.turn(conversation, turn, session)
            cpu = {**meter.stop(), "cores": os.cpu_count()}
            cpu["wall_seconds"] = round(time.monotonic() - began, 3)
            after = await driver.settled()  # nothing of one request runs into the next
            out.append(
                Paired(
                    index,
                    kind,
                    sent,
                    cpu,
                    commands.diff(after[0], before[0]),
                    commands.diff_seconds(after[1], before[1]),
                )
            )
            before = after
            if sent.status != "completed":
                return out
    return out


async def stored_bytes(
    uri: str, database: str, ids: Mapping[str, tuple[int, int]]
) -> dict[str, Any]:
    """Bytes of every document of ``database`` charged to the turn whose execution it names, by
    collection, and the serialized checkpoint (the state) of each turn's head."""
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri)
    by_turn: dict[str, Counter[str]] = {i: Counter() for i in ids}
    state: dict[str, int] = {}
    try:
        db = client[database]
        for name in sorted(await db.list_collection_names()):
            async for document in db[name].find({}):
                owner = owner_of(document, ids)
                if owner is None:
                    continue
                by_turn[owner][name] += document_bytes(document)
                blob = document.get("checkpoint")
                if name == CHECKPOINT_HEADS and isinstance(blob, bytes):
                    state[owner] = len(blob)
    finally:
        await client.close()
    return {
        i: {"collections": dict(sorted(c.items())), "state_bytes": state.get(i)}
        for i, c in by_turn.items()
    }
