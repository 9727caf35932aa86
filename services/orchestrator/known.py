"""The executions an orchestrator replica last stored or read, so that an event costs no read.

Kafka's partition assignment makes one replica the consumer of an execution's events (they are
keyed by execution id), so what this replica stored last is, almost always, still the newest
version. The handlers apply an event to it and compare-and-set the successor; only when that
insert loses (another writer got there: a rebalance, a sweep on another replica, the gateway's
``undelivered_since`` mark) do they read the execution again. A copy is never trusted for
anything that does not write: an event it would ignore or refuse is decided again on a fresh
read (services/orchestrator/handlers.py).
"""

from __future__ import annotations

from collections import OrderedDict

from shared.domain.execution import Execution

DEFAULT_CAPACITY = 10_000


class KnownExecutions:
    """A bounded, least-recently-used map of execution id to the newest version seen."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, Execution] = OrderedDict()

    def get(self, execution_id: str) -> Execution | None:
        found = self._items.get(execution_id)
        if found is not None:
            self._items.move_to_end(execution_id)
        return found

    def put(self, execution: Execution) -> None:
        """Remember ``execution`` unless a newer version is known (handlers of one execution's
        topics run concurrently; the one that read earlier may return later)."""
        if self._capacity <= 0:
            return
        known = self._items.get(execution.execution_id)
        if known is not None and known.version > execution.version:
            self._items.move_to_end(execution.execution_id)
            return
        self._items[execution.execution_id] = execution
        self._items.move_to_end(execution.execution_id)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
