"""What the unit tests' synchronous bus (tests/direct_bus.py) does beyond the bus contract
(tests/contract/test_bus_contract.py): delivered before ``publish`` returns, depth first, in a
context of its own, and a consumer that never stops failing ends the test instead of hanging it."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

import pytest

from shared.bus import Delivery
from tests.direct_bus import MAX_DELIVERIES, DirectBus, StuckMessage

seen_by_publisher: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "seen_by_publisher", default=None
)


@dataclass
class Recorder:
    name: str
    log: list[tuple[str, str, int, str | None]]
    then: DirectBus | None = None
    """Publishes each message it gets once more on ``<topic>.next``, like a handler would."""
    contexts: list[str | None] = field(default_factory=list)

    async def deliver(self, delivery: Delivery) -> None:
        self.log.append((self.name, delivery.topic, delivery.offset, delivery.key))
        self.contexts.append(seen_by_publisher.get())
        if self.then is not None and not delivery.topic.endswith(".next"):
            await self.then.publish_raw(delivery.body, f"{delivery.topic}.next", key=delivery.key)


@dataclass
class Failing:
    name: str = "failing"
    deliveries: int = 0

    async def deliver(self, delivery: Delivery) -> None:
        self.deliveries += 1
        raise ValueError("never works")


async def test_each_group_gets_every_message_depth_first_before_publish_returns() -> None:
    bus = DirectBus()
    log: list[tuple[str, str, int, str | None]] = []
    bus.add_consumer("t", "a", Recorder("a", log, then=bus))
    bus.add_consumer("t", "b", Recorder("b", log))
    bus.add_consumer("t.next", "c", Recorder("c", log))
    await bus.publish_raw(b"{}", "t", key="k1")
    await bus.publish_raw(b"{}", "t", key=None)
    assert log == [
        ("a", "t", 0, "k1"),
        ("c", "t.next", 0, "k1"),  # what a published, before b's turn
        ("b", "t", 0, "k1"),
        ("a", "t", 1, None),
        ("c", "t.next", 1, None),
        ("b", "t", 1, None),
    ]


async def test_a_consumer_does_not_see_its_publishers_context() -> None:
    bus = DirectBus()
    recorder = Recorder("a", [])
    bus.add_consumer("t", "a", recorder)
    token = seen_by_publisher.set("publisher")
    try:
        await bus.publish_raw(b"{}", "t", key="k")
    finally:
        seen_by_publisher.reset(token)
    assert recorder.contexts == [None]


async def test_a_second_consumer_in_one_group_is_refused() -> None:
    bus = DirectBus()
    bus.add_consumer("t", "a", Recorder("a", []))
    with pytest.raises(ValueError, match="already has a consumer"):
        bus.add_consumer("t", "a", Recorder("a2", []))


async def test_a_consumer_that_keeps_failing_is_given_up_on_not_retried_forever() -> None:
    bus = DirectBus()
    failing = Failing()
    bus.add_consumer("t", "a", failing)
    with pytest.raises(StuckMessage, match=r"failing still failed .* t@0") as raised:
        await bus.publish_raw(b"{}", "t", key="k")
    assert failing.deliveries == MAX_DELIVERIES
    assert isinstance(raised.value.__cause__, ValueError)


@dataclass
class Forwarding:
    """A handler that publishes and turns any error of that into an outcome of its own."""

    bus: DirectBus
    name: str = "forwarding"
    deliveries: int = 0
    caught: list[Exception] = field(default_factory=list)

    async def deliver(self, delivery: Delivery) -> None:
        self.deliveries += 1
        try:
            await self.bus.publish_raw(delivery.body, "t.next", key=delivery.key)
        except Exception as exc:
            self.caught.append(exc)


async def test_giving_up_is_not_caught_by_the_handler_that_published() -> None:
    """Raised where a nested publish gives up, it reaches the test's own call through the
    handlers' ``except Exception`` on its way, and the outer message is not delivered again."""
    bus = DirectBus()
    forwarding = Forwarding(bus)
    bus.add_consumer("t", "a", forwarding)
    failing = Failing()
    bus.add_consumer("t.next", "b", failing)
    with pytest.raises(StuckMessage):
        await bus.publish_raw(b"{}", "t", key="k")
    assert (forwarding.deliveries, forwarding.caught) == (1, [])
    assert failing.deliveries == MAX_DELIVERIES
