"""Reading an execution stream's server-sent events in tests: ``(kind, id, data)`` triples."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from httpx_sse import ServerSentEvent

Event = tuple[str, str, dict[str, Any]]


async def read_until(events: AsyncIterator[ServerSentEvent], last: str) -> list[Event]:
    """Events up to and including the first ``last`` one. Keep ``events`` referenced while the
    stream should stay open: httpx closes the connection once the iterator is collected."""
    seen = []
    async for event in events:
        if event.data:
            seen.append((event.event, event.id, json.loads(event.data)))
        if event.event == last:
            break
    return seen


def statuses(events: list[Event]) -> list[str]:
    return [data["to_status"] for kind, _, data in events if kind == "status"]
