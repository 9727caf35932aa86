"""A drain (a rebalance, a stop) cancels the messages still in flight after its grace, and does
not wait without end for one whose task ignores its cancellation, as a driver call can
(shared/kafka_consumer.py, ``CANCEL_WAIT_SECONDS``)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiokafka import TopicPartition

from shared import kafka_consumer
from shared.kafka_consumer import ConsumerOptions, KeyedKafkaConsumer
from shared.keyed_window import Held


class Handler:
    name = "drain-test"

    async def deliver(self, delivery: object) -> None:  # never called here
        raise AssertionError


def consumer() -> KeyedKafkaConsumer:
    options = ConsumerOptions(
        client={},
        group_id="g",
        group_instance_id=None,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=3_000,
        max_poll_interval_ms=300_000,
        graceful_timeout_seconds=0.01,
        rebalance_grace_seconds=0.01,
        client_id="c",
    )
    keyed = KeyedKafkaConsumer(options)
    keyed.subscribe("t", Handler(), limit=4, max_held=8)  # type: ignore[arg-type]
    return keyed


async def test_a_task_that_ignores_its_cancellation_does_not_hold_the_drain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_consumer, "CANCEL_WAIT_SECONDS", 0.05)
    partition = TopicPartition("t", 0)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    keyed = consumer()
    task = asyncio.create_task(stubborn())
    keyed._tasks[task] = Held(partition=partition, offset=7, key=b"k", item=None)  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(keyed._drain({partition}, timeout=0.01), timeout=5)
        assert not task.done()  # left to finish on its own
    finally:
        release.set()
        await task


async def test_tasks_that_unwind_are_waited_for() -> None:
    partition = TopicPartition("t", 0)
    unwound: list[int] = []

    async def cooperative(number: int) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.01)  # cleanup that takes a moment
            unwound.append(number)

    keyed = consumer()
    tasks = [asyncio.create_task(cooperative(n)) for n in range(3)]
    for offset, task in enumerate(tasks):
        keyed._tasks[task] = Held(partition=partition, offset=offset, key=offset, item=None)  # type: ignore[arg-type]
    await asyncio.sleep(0)

    await keyed._drain({partition}, timeout=0.01)

    assert sorted(unwound) == [0, 1, 2]
    assert all(task.cancelled() for task in tasks)
