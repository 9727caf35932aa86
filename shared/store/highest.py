"""Picking the newest of an execution's few documents on the client."""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.cursor import AsyncCursor

Document = dict[str, Any]


async def highest(found: AsyncCursor[Document], field: str) -> Document | None:
    """The found document with the highest ``field``, picked here rather than by a server-side
    sort: the few documents one execution keeps are cheap to read, while FerretDB does not push a
    sorted query's filter down to its backend and scans the whole collection instead (measured:
    600 ms at 4,500 versions, against 8 ms for the same filter unsorted)."""
    best: Document | None = None
    async for document in found:
        if best is None or document[field] > best[field]:
            best = document
    return best
