"""The in-memory adapter of shared/store/memories.py: for unit tests and the contract suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime

from shared.store.memories import MemoryItem, Namespace, Tenant, item_id


def _newest_first(item: MemoryItem) -> tuple[float, str]:
    """The order of every adapter: the latest update first, then by ``item_id``."""
    return (-item.updated_at.timestamp(), item_id(item.tenant, item.namespace, item.key))


class InMemoryMemories:
    def __init__(self) -> None:
        self._items: dict[tuple[Tenant, Namespace, str], MemoryItem] = {}

    async def ensure_indexes(self) -> None:
        pass

    async def put(self, item: MemoryItem) -> None:
        where = (item.tenant, item.namespace, item.key)
        before = self._items.get(where)
        if before is not None:
            item = item.model_copy(update={"created_at": before.created_at})
        self._items[where] = item

    async def get(self, tenant: Tenant, namespace: Namespace, key: str) -> MemoryItem | None:
        return self._items.get((tenant, namespace, key))

    async def delete(self, tenant: Tenant, namespace: Namespace, key: str) -> None:
        self._items.pop((tenant, namespace, key), None)

    def _under(self, tenant: Tenant, prefix: Namespace) -> list[MemoryItem]:
        return [
            item
            for (owner, namespace, _), item in self._items.items()
            if owner == tenant and namespace[: len(prefix)] == prefix
        ]

    async def search(
        self, tenant: Tenant, prefix: Namespace, *, at_most: int | None
    ) -> AsyncIterator[MemoryItem]:
        for item in sorted(self._under(tenant, prefix), key=_newest_first)[:at_most]:
            yield item

    async def namespace_expiries(
        self, tenant: Tenant, prefix: Namespace
    ) -> list[tuple[Namespace, datetime | None]]:
        return [(item.namespace, item.expires_at) for item in self._under(tenant, prefix)]

    async def refresh(self, items: Sequence[MemoryItem]) -> None:
        for item in items:
            where = (item.tenant, item.namespace, item.key)
            stored = self._items.get(where)
            if stored is not None:
                self._items[where] = stored.model_copy(update={"expires_at": item.expires_at})

    async def expire(self, now: datetime, *, limit: int) -> int:
        due = [where for where, item in self._items.items() if item.expired(now)][:limit]
        for where in due:
            del self._items[where]
        return len(due)
