"""A store that counts the calls made through it to its executions and its progress log, to
prove what a component reads (the gateway's streams read once, when they open)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from shared.store.ports import Store


class CountedCalls:
    """``target`` as it is, every method call counted as ``<prefix>.<method>``."""

    def __init__(self, target: Any, counts: Counter[str], prefix: str) -> None:
        self._target = target
        self._counts = counts
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counts[f"{self._prefix}.{name}"] += 1
            return found(*args, **kwargs)

        return counted


class CountingStore:
    """``store`` with its ``executions`` and ``progress`` counted in ``counts``."""

    def __init__(self, store: Store) -> None:
        self.counts: Counter[str] = Counter()
        self._store = store
        self.executions = CountedCalls(store.executions, self.counts, "executions")
        self.progress = CountedCalls(store.progress, self.counts, "progress")

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
