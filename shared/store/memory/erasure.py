"""In-memory adapter of shared/store/erasure.py.

It reaches into the other in-memory adapters' dicts: they are one store's parts, and giving each
port a removal method only for this would widen every port for one caller. Records are matched
by the execution id they hold, never by a prefix, so ``abc`` never takes ``abc1``'s. What is
erased, and what ``keep_audit`` keeps, is as on MongoDB (shared/store/mongo/erasure.py): the
head is the only version kept here, and there are no waiting markers or approval slots.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from shared.store.memory.store import InMemoryStore

K = TypeVar("K")


def _remove(records: dict[K, Any], belongs: Callable[[K, Any], bool]) -> int:
    gone = [key for key, value in records.items() if belongs(key, value)]
    for key in gone:
        del records[key]
    return len(gone)


class InMemoryErasure:
    def __init__(self, store: InMemoryStore) -> None:
        self._store = store

    async def erase(self, execution_ids: Sequence[str], *, keep_audit: bool) -> int:
        ids = set(execution_ids)
        for eid in ids:
            # Refused as by the other adapters, whose keys such an id would make ambiguous.
            if not eid or ":" in eid or "|" in eid:
                raise ValueError(f"an execution id cannot be empty or hold ':' or '|': {eid!r}")
        store = self._store
        attempts, progress, notifications = store.attempts, store.progress, store.notifications
        # An attempt ledger entry is the latest number of an (execution, epoch): that many.
        removed = sum(n for (eid, _), n in attempts._latest.items() if eid in ids)
        _remove(attempts._latest, lambda key, _: key[0] in ids)
        removed += _remove(store.steps._records, lambda _, r: r.execution_id in ids)
        removed += sum(len(e) for (_, eid), e in progress._entries.items() if eid in ids)
        _remove(progress._entries, lambda key, _: key[1] in ids)
        if keep_audit:
            return removed
        removed += _remove(notifications._pending, lambda _, d: d.notification.execution_id in ids)
        approvals, links = store.approvals, store.spent_links
        removed += _remove(store.decisions._claims, lambda key, _: key[0] in ids)
        removed += sum(len(a) for (eid, _), a in approvals._by_generation.items() if eid in ids)
        _remove(approvals._by_generation, lambda key, _: key[0] in ids)
        deliveries = {
            delivery_id
            for delivery_id, delivery in notifications._deliveries.items()
            if delivery.notification.execution_id in ids
        }
        # A claim's id is its delivery's and the attempt (shared/store/notifications.py).
        removed += _remove(
            notifications._claims, lambda key, _: key.rpartition(":")[0] in deliveries
        )
        removed += _remove(notifications._deliveries, lambda key, _: key in deliveries)
        # A spent link names its execution: gone with it (see shared/store/mongo/erasure.py).
        removed += _remove(links._uses, lambda _, use: use.execution_id in ids)
        removed += _remove(store.executions._items, lambda key, _: key in ids)
        return removed
