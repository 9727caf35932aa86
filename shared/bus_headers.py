"""The headers of a published event, written once for every bus (Kafka's publisher, the
in-process bus of ``interlock dev`` and the tests' direct bus): the caller's own (the sealed
custom headers, ``shared/custom_headers.py``), the content type, the event type, and the trace
context of the producer span around the publish."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import BaseModel

from shared import tracing

CONTENT_TYPE = "application/json"


def event_type_of(event: BaseModel) -> str:
    """The event's ``type`` field; the class name of a model without one."""
    return str(getattr(event, "type", type(event).__name__))


@contextmanager
def publishing(
    event: BaseModel, topic: str, key: str, headers: dict[str, str] | None = None
) -> Iterator[dict[str, str]]:
    """Open the producer span of one publish and give the headers to send ``event`` with.
    The bus hands the message over inside the block, so the span covers it."""
    event_type = event_type_of(event)
    all_headers = {**(headers or {}), "content-type": CONTENT_TYPE, "event-type": event_type}
    with tracing.publishing(topic, event_type, key, all_headers):
        yield all_headers
