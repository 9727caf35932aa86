"""A synchronous in-memory bus for tests: ``publish`` hands the message to every consumer of its
topic and returns only once they are all done, so each step (and every publish it makes in
turn, delivered the same way, depth first) is complete when the test's call returns.

It is what FastStream's ``TestKafkaBroker`` gave the unit tests, on the bus interfaces of
``shared/bus.py``: a ``ConsumerHost`` (``route`` adds the services' consumers with
``add_consumer``), a ``ListenerHost`` and an ``EventPublisher``. It passes the bus contract
(tests/contract/test_bus_contract.py) like the real buses.

Delivery:
- one consumer per consumer group of a topic, in the order they were added (a Kafka group
  shares a topic's partitions among its members; with one partition a second member of a
  group would get nothing, so adding one is refused as a mistake);
- one partition (0), offsets numbered per topic from 0 in publish order;
- each delivery runs as a task of its own in a fresh, empty ``contextvars.Context``, as a real
  consumer does: a handler never sees the context variables of the code that published (log
  bindings, the current span, the fence of a sandbox run), which the in-memory test broker
  leaked to it, so a test cannot pass on state that Kafka would not carry;
- ``limit`` and ``max_held`` are accepted and not needed: one message at a time, in publish
  order, keeps every key in order under any limit.

Listeners (``add_listener``) hear each message published after they were added, before its
consumers get it, each in a fresh, empty context; one that raises is logged and the others, and
the consumers, get the message all the same.

A consumer that raises. The tests left this open: ``TestKafkaBroker`` handed the error to
whoever published and never delivered the message again, but no test had a consumer raise on it
(checked by recording every raise of ``Consumer.deliver`` over the suites that used it). So the
bus does what Kafka and the in-process bus do, which the contract checks: it delivers the same
message (same offset) again, at once, since ``Consumer`` has paused before raising. ``Consumer``
then retries a failing dependency and dead-letters a message that keeps failing after
``MAX_UNEXPECTED_FAILURES`` deliveries. Kafka would redeliver forever; a test must not hang, so
after ``MAX_DELIVERIES`` the bus gives up with ``StuckMessage``, which ends the test.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel

from shared.bus import MAX_UNEXPECTED_FAILURES, Delivery, DeliveryHandler, Listener
from shared.bus_headers import publishing
from shared.events import encode_event

log = structlog.get_logger(__name__)

MAX_DELIVERIES = 2 * MAX_UNEXPECTED_FAILURES
"""Deliveries of one message to one consumer before the bus gives up. Above
``MAX_UNEXPECTED_FAILURES``, so a handler that keeps failing is dead-lettered by ``Consumer``
as on Kafka; what still raises after that is a dependency failing for good (each try pauses
``RETRY_DELAY_SECONDS`` in ``Consumer``: at most ~10 s) or a consumer that is not a
``Consumer``."""


class StuckMessage(BaseException):
    """A message whose consumer still raised after ``MAX_DELIVERIES`` deliveries: on Kafka its
    partition would be stuck. A ``BaseException``, like ``asyncio.CancelledError``, so that no
    ``except Exception`` on its way out (the ``Consumer`` of the handler that published it, a
    handler that turns errors into outcomes, this bus delivering that handler's message again)
    catches it: it ends the test, with the consumer's last error as its cause."""


class DirectBus:
    """Publisher, consumer host and listener host in one; nothing to start or stop."""

    def __init__(self) -> None:
        self._consumers: dict[str, dict[str, DeliveryHandler]] = defaultdict(dict)
        """Per topic, per consumer group, in the order they were added (dicts keep it)."""
        self._listeners: dict[str, list[Listener]] = defaultdict(list)
        self._next_offset: dict[str, int] = defaultdict(int)

    def add_consumer(
        self,
        topic: str,
        group_id: str,
        consumer: DeliveryHandler,
        *,
        limit: int = 1,
        max_held: int | None = None,
    ) -> None:
        groups = self._consumers[topic]
        if group_id in groups:
            raise ValueError(f"group {group_id!r} already has a consumer on {topic!r}")
        groups[group_id] = consumer

    def add_listener(self, topic: str, listener: Listener) -> None:
        self._listeners[topic].append(listener)

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        # The headers and the producer span of KafkaPublisher and InProcessBus.
        with publishing(event, topic, key, headers) as all_headers:
            await self.publish_raw(encode_event(event), topic, key=key, headers=all_headers)

    async def publish_raw(
        self, body: bytes, topic: str, *, key: str | None, headers: dict[str, str] | None = None
    ) -> None:
        """Deliver a message as it is (an outside producer's bytes, valid or not)."""
        # Numbered before delivery, so what the consumers publish comes after it.
        offset = self._next_offset[topic]
        self._next_offset[topic] = offset + 1
        delivery = Delivery(
            topic=topic,
            partition=0,
            offset=offset,
            key=key,
            body=body,
            headers=dict(headers or {}),
        )
        # Listeners before the consumers: a consumer publishes as it handles, and depth first
        # its messages are delivered before this call returns; heard after the consumers, a
        # reply on the same topic and key would reach the listeners before the message it
        # answers, where per key they must hear the publish order (as on Kafka, where the
        # reply is published, so appended, after its cause).
        for listener in list(self._listeners[topic]):
            self._tell(listener, delivery)
        # A copy: a consumer added while this message is delivered did not see it published.
        for consumer in list(self._consumers[topic].values()):
            await self._deliver(consumer, delivery)

    @staticmethod
    def _tell(listener: Listener, delivery: Delivery) -> None:
        try:
            # An empty context, as for the consumers: the listener does not inherit ours.
            contextvars.Context().run(listener, delivery)
        except Exception:
            # As on the real buses: a listener gets no redelivery, the others hear it anyway.
            log.exception("listener.failed", topic=delivery.topic, offset=delivery.offset)

    @staticmethod
    async def _deliver(consumer: DeliveryHandler, delivery: Delivery) -> None:
        last: Exception | None = None
        for _ in range(MAX_DELIVERIES):
            # A task of its own in an empty context: the consumer does not inherit ours.
            task = asyncio.create_task(consumer.deliver(delivery), context=contextvars.Context())
            try:
                await task
                return
            except Exception as exc:  # redelivered, as Kafka would after a raise
                last = exc
        raise StuckMessage(
            f"{consumer.name} still failed after {MAX_DELIVERIES} deliveries of"
            f" {delivery.topic}@{delivery.offset}: {last!r}"
        ) from last


@dataclass
class Collector:
    """A consumer that keeps the JSON bodies it is given (a test's observer of a topic)."""

    name: str
    into: list[Any]

    async def deliver(self, delivery: Delivery) -> None:
        self.into.append(json.loads(delivery.body))
