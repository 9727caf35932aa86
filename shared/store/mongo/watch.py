"""Watches the database's commands from the driver: each command's time goes to
``interlock_store_command_seconds{command,collection}``, and one slower than
``INTERLOCK_MONGODB_SLOW_COMMAND_MS`` is logged with the shape of its filter (field names,
never values: they can be reviewers' data). A slow store shows up as one collection and one
query shape instead of every handler getting slower at once."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import structlog
from pymongo import monitoring

from shared.metrics import STORE_COMMAND_SECONDS, STORE_CONNECTIONS

log = structlog.get_logger(__name__)

OPERATIONS = frozenset(
    {
        "find",
        "insert",
        "update",
        "delete",
        "findAndModify",
        "aggregate",
        "count",
        "distinct",
        "getMore",
        "createIndexes",
    }
)
"""Commands measured; the driver's own (hello, ping, endSessions...) are not the app's load."""


def filter_shape(command: Mapping[str, Any]) -> list[str]:
    """The field names a command selects on: enough to find the query, nothing of its data."""
    selectors: list[Any] = [command.get("filter"), command.get("query")]
    for statement in command.get("updates", []) + command.get("deletes", []):
        selectors.append(statement.get("q"))
    for stage in command.get("pipeline", []):
        selectors.append(stage.get("$match"))
    return sorted({key for selector in selectors if isinstance(selector, dict) for key in selector})


class CommandWatch(monitoring.CommandListener):
    """Thread-safe: the sandbox's checkpointer drives a synchronous client from worker threads."""

    def __init__(self, slow_ms: float | None) -> None:
        self._slow_ms = slow_ms
        self._started: dict[tuple[Any, int], tuple[str, list[str]]] = {}
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name not in OPERATIONS:
            return
        target = event.command.get(event.command_name)
        collection = target if isinstance(target, str) else event.command.get("collection", "")
        shape = filter_shape(event.command) if self._slow_ms is not None else []
        with self._lock:
            self._started[(event.connection_id, event.request_id)] = (str(collection), shape)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self._finished(event, failed=False)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._finished(event, failed=True)

    def _finished(
        self, event: monitoring.CommandSucceededEvent | monitoring.CommandFailedEvent, failed: bool
    ) -> None:
        with self._lock:
            started = self._started.pop((event.connection_id, event.request_id), None)
        if started is None:
            return
        collection, shape = started
        seconds = event.duration_micros / 1e6
        STORE_COMMAND_SECONDS.labels(event.command_name, collection).observe(seconds)
        if self._slow_ms is not None and seconds * 1000 >= self._slow_ms:
            log.warning(
                "store.slow_command",
                command=event.command_name,
                collection=collection,
                filter_fields=shape,
                ms=round(seconds * 1000, 1),
                failed=failed,
            )


class ConnectionWatch(monitoring.ConnectionPoolListener):
    """Counts the driver's new and closed connections (``interlock_store_connections_total``):
    a pool that keeps opening connections (each a DNS lookup on a worker thread, a TCP handshake
    and the server's handshake) under a steady load is losing them somewhere."""

    def connection_created(self, event: monitoring.ConnectionCreatedEvent) -> None:
        STORE_CONNECTIONS.labels("created", "").inc()

    def connection_closed(self, event: monitoring.ConnectionClosedEvent) -> None:
        STORE_CONNECTIONS.labels("closed", str(event.reason)).inc()

    def pool_cleared(self, event: monitoring.PoolClearedEvent) -> None:
        STORE_CONNECTIONS.labels("pool_cleared", "").inc()

    def pool_created(self, event: monitoring.PoolCreatedEvent) -> None: ...

    def pool_ready(self, event: monitoring.PoolReadyEvent) -> None: ...

    def pool_closed(self, event: monitoring.PoolClosedEvent) -> None: ...

    def connection_ready(self, event: monitoring.ConnectionReadyEvent) -> None: ...

    def connection_check_out_started(
        self, event: monitoring.ConnectionCheckOutStartedEvent
    ) -> None: ...

    def connection_check_out_failed(
        self, event: monitoring.ConnectionCheckOutFailedEvent
    ) -> None: ...

    def connection_checked_out(self, event: monitoring.ConnectionCheckedOutEvent) -> None: ...

    def connection_checked_in(self, event: monitoring.ConnectionCheckedInEvent) -> None: ...
