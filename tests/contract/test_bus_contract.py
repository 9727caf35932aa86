"""The bus contract: the same tests on real Kafka, on the in-process bus of ``interlock dev``
(SQLite-backed), and on the synchronous in-memory bus of the unit tests (tests/direct_bus.py):
every fake passes the contract of the real buses, redelivery after a failing dependency included.

A bus is one entry of ``OPENERS``: how to open a ``Harness`` on it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from shared.bus import ConsumerHost, EventPublisher, ensure_topics, route
from shared.errors import RejectedMessage, RetryableError
from shared.events import AgentInput, ExecutionRequested, encode_event
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.direct_bus import Collector, DirectBus
from tests.eventually import eventually


@dataclass
class Harness:
    send: Callable[[bytes, str], Awaitable[None]]
    settings: CommonSettings
    handled: list[ExecutionRequested] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    transient_failures_left: int = 0

    async def publish_raw(self, payload: bytes, key: str = "exec-1") -> None:
        await self.send(payload, key)

    async def wait_handled(self, count: int) -> list[ExecutionRequested]:
        return await eventually(
            self._handled, lambda h: len(h) >= count, timeout=30, what=f"{count} handled"
        )

    async def wait_dead_letters(self, count: int) -> list[dict[str, Any]]:
        return await eventually(
            self._dead, lambda d: len(d) >= count, timeout=30, what=f"{count} dead letters"
        )

    async def _handled(self) -> list[ExecutionRequested]:
        return list(self.handled)

    async def _dead(self) -> list[dict[str, Any]]:
        return list(self.dead_letters)


def request(execution_id: str, agent: str = "refund-approval") -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=execution_id,
        project_id="p",
        workspace_id="w",
        agent=agent,
        input=AgentInput(message="hi"),
    )


def contract_settings(bootstrap: str) -> CommonSettings:
    run = uuid.uuid4().hex[:8]
    return CommonSettings(
        kafka_bootstrap_servers=bootstrap,
        topic_prefix=f"contract-{run}.",
        consumer_group_prefix=f"contract-{run}",
        topic_partitions=2,
    )


@asynccontextmanager
async def open_kafka_harness(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Harness]:
    settings = contract_settings(request.getfixturevalue("kafka_bootstrap"))
    await ensure_topics(settings)
    bus = KafkaBus(settings, "contract")

    async def send(payload: bytes, key: str) -> None:
        await bus.broker.publish(payload, topic=settings.topics.requested, key=key.encode())

    h = Harness(send=send, settings=settings)
    route(bus, settings, bus.publisher, **handler_route(h, settings))
    collector = Collector("dead-letter-collector", h.dead_letters)
    bus.add_consumer(
        settings.topics.dead_letters, f"{settings.consumer_group_prefix}-dlq", collector
    )
    await bus.start()
    try:
        yield h
    finally:
        await bus.stop()


class HostingBus(ConsumerHost, EventPublisher, Protocol):
    """A bus that runs ``route``'s consumers itself and takes an outside producer's bytes."""

    async def publish_raw(
        self, body: bytes, topic: str, *, key: str | None, headers: dict[str, str] | None = None
    ) -> None: ...


def hosted_harness(bus: HostingBus) -> Harness:
    """The contract's handler and dead-letter collector on a bus that hosts its consumers."""
    settings = contract_settings("unused:9092")

    async def send(payload: bytes, key: str) -> None:
        await bus.publish_raw(payload, settings.topics.requested, key=key)

    h = Harness(send=send, settings=settings)
    route(bus, settings, bus, **handler_route(h, settings))
    collector = Collector("dead-letter-collector", h.dead_letters)
    bus.add_consumer(settings.topics.dead_letters, "dlq", collector)
    return h


@asynccontextmanager
async def open_inprocess_harness(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Harness]:
    bus = InProcessBus(tmp_path / "bus.sqlite")
    h = hosted_harness(bus)
    await bus.start()
    try:
        yield h
    finally:
        await bus.stop()


@asynccontextmanager
async def open_direct_harness(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Harness]:
    # Nothing to start: each publish is delivered before it returns.
    yield hosted_harness(DirectBus())


Opener = Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[Harness]]

OPENERS: dict[str, Opener] = {
    "direct": open_direct_harness,
    "inprocess": open_inprocess_harness,
    "kafka": open_kafka_harness,
}
"""Every bus the contract runs on: a new bus is one more entry."""
NEEDS_INFRASTRUCTURE = {"kafka"}
BUSES = [
    pytest.param(kind, marks=pytest.mark.integration) if kind in NEEDS_INFRASTRUCTURE else kind
    for kind in OPENERS
]


@pytest.fixture(params=BUSES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async with OPENERS[request.param](request, tmp_path) as h:
        yield h


def handler_route(h: Harness, settings: CommonSettings) -> dict[str, Any]:
    async def handle(event: ExecutionRequested) -> None:
        if event.agent == "rejected-agent":
            raise RejectedMessage(f"unknown agent {event.agent!r}")
        if event.agent == "flaky-agent" and h.transient_failures_left > 0:
            h.transient_failures_left -= 1
            raise RetryableError("database blinked")
        h.handled.append(event)

    return {
        "service": "contract",
        "topic": settings.topics.requested,
        "model": ExecutionRequested,
        "handle": handle,
    }


async def test_valid_events_reach_the_handler_in_order_per_key(harness: Harness) -> None:
    for i in range(5):
        await harness.publish_raw(encode_event(request(f"exec-{i % 2}-{i}")), key=f"exec-{i % 2}")
    handled = await harness.wait_handled(5)
    for key in ("exec-0", "exec-1"):
        ids = [e.execution_id for e in handled if e.execution_id.startswith(key)]
        assert ids == sorted(ids, key=lambda x: int(x.rsplit("-", 1)[1]))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"type": "execution.requested", "version": 99}', "unsupported version 99"),
        (b'{"type": "something.else", "version": 1}', "unexpected event type"),
    ],
)
async def test_undecodable_messages_are_dead_lettered_with_the_reason(
    harness: Harness, payload: bytes, reason: str
) -> None:
    await harness.publish_raw(payload, key="bad-1")
    await harness.publish_raw(encode_event(request("good-after-bad")), key="bad-1")
    [letter] = await harness.wait_dead_letters(1)
    assert reason in letter["reason"]
    assert letter["source_topic"] == harness.settings.topics.requested
    assert letter["payload"] == payload.decode()
    assert letter["key"] == "bad-1"
    assert [e.execution_id for e in await harness.wait_handled(1)] == ["good-after-bad"]


async def test_rejected_messages_are_dead_lettered_and_do_not_block(harness: Harness) -> None:
    await harness.publish_raw(encode_event(request("r-1", agent="rejected-agent")), key="k")
    await harness.publish_raw(encode_event(request("r-2")), key="k")
    [letter] = await harness.wait_dead_letters(1)
    assert letter["error_type"] == "RejectedMessage"
    assert "unknown agent 'rejected-agent'" in letter["reason"]
    assert [e.execution_id for e in await harness.wait_handled(1)] == ["r-2"]


async def test_missing_field_names_the_field(harness: Harness) -> None:
    event = json.loads(encode_event(request("m-1")))
    del event["agent"]
    await harness.publish_raw(json.dumps(event).encode(), key="m-1")
    [letter] = await harness.wait_dead_letters(1)
    assert "agent" in letter["reason"] and "Field required" in letter["reason"]


async def test_a_failing_dependency_is_retried_not_dead_lettered(harness: Harness) -> None:
    h = harness
    h.transient_failures_left = 2
    await h.publish_raw(encode_event(request("flaky-1", agent="flaky-agent")), key="flaky")
    [event] = await h.wait_handled(1)
    assert event.execution_id == "flaky-1" and h.transient_failures_left == 0
    assert h.dead_letters == []
