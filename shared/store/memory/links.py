"""In-memory adapter of shared/store/links.py."""

from __future__ import annotations

from shared.store.links import LinkUse


class InMemorySpentLinks:
    def __init__(self) -> None:
        self._uses: dict[str, LinkUse] = {}

    async def spend(self, use: LinkUse) -> bool:
        return self._uses.setdefault(use.link_id, use) is use

    async def spent(self, link_id: str) -> bool:
        return link_id in self._uses
