"""Found by the chaos suite: a poison message near the broker's size limit must still be
dead-lettered. Its dead letter quoted it whole (JSON escaping can double it), so the letter was
too big to publish and the message was redelivered forever, blocking its partition."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from shared.bus import DEAD_LETTER_PAYLOAD_BYTES, Consumer, Delivery
from shared.events import ExecutionRequested, MessageDeadLettered, decode_event


class Recorder:
    def __init__(self) -> None:
        self.published: list[tuple[BaseModel, str]] = []

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        self.published.append((event, topic))


async def test_an_oversized_poison_message_gets_a_dead_letter_that_fits() -> None:
    publisher = Recorder()

    async def handle(event: Any) -> None:
        raise AssertionError("never called: the message is invalid")

    consumer = Consumer(
        name="orchestrator:execution.requested",
        decode=lambda raw: decode_event(raw, (ExecutionRequested,)),
        handle=handle,
        publisher=publisher,
        dead_letter_topic="execution.dead_lettered",
    )
    body = json.dumps(
        {"type": "execution.requested", "version": 1, "event_id": "e", "padding": '"' * 480_000}
    ).encode()
    await consumer.deliver(Delivery("execution.requested", 0, 7, "k", body))
    [(letter, topic)] = publisher.published
    assert topic == "execution.dead_lettered" and isinstance(letter, MessageDeadLettered)
    assert len(letter.payload) <= DEAD_LETTER_PAYLOAD_BYTES
    assert f"of {len(body)} bytes" in letter.reason
    assert len(letter.model_dump_json()) < 1_000_000  # under the broker's default message size
