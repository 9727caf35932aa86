"""How the harness sees executions change status without slowing them down.

- ``KafkaStatusWatcher``: reads ``execution.status``, the orchestrator's public topic of every
  transition, as any outside system may. Exact and free for the services.
- ``ChangesWatcher``: the embedded mode has no broker to read from outside, so it follows the
  run's workspace on the gateway's push feed (``GET .../changes``), as the review page does:
  each change as it happens, and no request per look.
  The feed replays nothing: after its stream reopens, the run's workspace (each run has one of
  its own) is listed once by status to catch up.
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


class ChangesWatcher:
    """Follows the workspace on the gateway's push feed. The feed replays nothing, so a stream
    that closes (its lifetime, a fall behind) is opened again and the workspace listed once to
    catch up with what happened meanwhile."""

    def __init__(self, client: BenchClient) -> None:
        self._client = client
        self._seen: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self, on_status: OnStatus) -> None:
        opened = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(on_status, opened))
        await opened  # the stream is open before any load starts

    def approved(self, execution_id: str) -> None:
        pass  # every change of the workspace is pushed anyway

    def _saw(self, on_status: OnStatus, execution_id: str, status: str) -> None:
        if (execution_id, status) not in self._seen:
            self._seen.add((execution_id, status))
            on_status(execution_id, status, time.time())

    async def _run(self, on_status: OnStatus, opened: asyncio.Future[None]) -> None:
        try:
            await self._follow(on_status, opened)
        except BaseException as exc:
            if not opened.done():  # start() is told, rather than waiting for ever
                opened.set_exception(exc)
            raise

    async def _follow(self, on_status: OnStatus, opened: asyncio.Future[None]) -> None:
        first = True
        while True:
            async with self._client.changes() as changes:
                if first:
                    opened.set_result(None)
                else:
                    for status in ("suspended", "completed", "error"):
                        for execution_id in await self._client.ids_with_status(status):
                            self._saw(on_status, execution_id, status)
                first = False
                async for execution_id, status in changes:
                    self._saw(on_status, execution_id, status)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
