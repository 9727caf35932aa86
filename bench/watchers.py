"""How the harness sees executions change status without slowing them down.

- ``KafkaStatusWatcher``: reads ``execution.status``, the orchestrator's public topic of every
  transition, as any outside system may. Exact and free for the services.
- ``PollingWatcher``: the embedded mode has no broker to read from outside, so it lists the
  run's workspace by status through the HTTP API (each run has a workspace of its own, so a
  list is as long as the run). Its resolution is its interval, and its requests are load on
  the one process: the results page says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.client import BenchClient

OnStatus = Callable[[str, str, float], None]
"""Called with (execution_id, status, wall-clock time seen)."""

TERMINAL = frozenset({"completed", "error", "cancelled", "expired"})


class Watcher(Protocol):
    async def start(self, on_status: OnStatus) -> None: ...

    def approved(self, execution_id: str) -> None:
        """The harness decided this execution: follow it to its end."""

    async def stop(self) -> None: ...


class KafkaStatusWatcher:
    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._partitions = partitions
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, on_status: OnStatus) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, enable_auto_commit=False)
        await consumer.start()
        # Assigned, not subscribed: no consumer group, nothing committed, no rebalance.
        assigned = [TopicPartition(self._topic, p) for p in range(self._partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_end(*assigned)
        for tp in assigned:  # resolve the end offsets now, before any load starts
            await consumer.position(tp)
        self._consumer = consumer
        self._task = asyncio.create_task(self._run(consumer, on_status))

    async def _run(self, consumer: AIOKafkaConsumer, on_status: OnStatus) -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=100, max_records=1000)
            seen = time.time()
            for records in batches.values():
                for record in records:
                    status = _status_of(record.value)
                    if status is not None:
                        on_status(*status, seen)

    def approved(self, execution_id: str) -> None:
        pass  # every status arrives on the topic anyway

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # A watcher that failed must still close its consumer.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


def _status_of(value: bytes | None) -> tuple[str, str] | None:
    """(execution_id, status) of an ``execution.status`` message; None for anything else (the
    chaos suite publishes poison on every topic: a watcher that died on one would go blind)."""
    try:
        event = json.loads(value or b"")
        return str(event["execution_id"]), str(event["status"])
    except (ValueError, TypeError, KeyError):
        return None


class PollingWatcher:
    def __init__(self, client: BenchClient, *, interval: float) -> None:
        self._client = client
        self._interval = interval
        self._following: set[str] = set()
        self._seen: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self, on_status: OnStatus) -> None:
        self._task = asyncio.create_task(self._run(on_status))

    def approved(self, execution_id: str) -> None:
        self._following.add(execution_id)

    async def _run(self, on_status: OnStatus) -> None:
        while True:
            began = time.monotonic()
            statuses = ["suspended", *(("completed", "error") if self._following else ())]
            for status in statuses:
                for execution_id in await self._client.ids_with_status(status):
                    if (execution_id, status) not in self._seen:
                        self._seen.add((execution_id, status))
                        self._following.discard(execution_id)
                        on_status(execution_id, status, time.time())
            await asyncio.sleep(max(0.0, self._interval - (time.monotonic() - began)))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
