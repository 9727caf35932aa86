"""Progress of running executions: node updates and model tokens, for the gateway's stream.

The sandbox appends while an agent runs; the gateway reads what came after a client's cursor.
Progress is a view for people watching, not state: the checkpoint and the step cache hold what
a run needs, so progress is written best-effort and expires (a TTL index where the server has
them).

Each entry's key is ``<epoch>.<attempt>.<seq>`` with fixed widths, so keys sort in the order
the entries were written: epochs grow with every resume, attempts with every takeover, and
``seq`` counts within one attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

PROGRESS_TTL = timedelta(days=7)
PROGRESS_PAGE = 500
"""Entries one ``after`` call returns at most."""


def progress_key(epoch: int, attempt: int, seq: int) -> str:
    return f"{epoch:06d}.{attempt:04d}.{seq:06d}"


@dataclass(frozen=True)
class ProgressEntry:
    key: str
    """Where the entry sorts among the execution's progress (``progress_key``)."""
    kind: str
    """``update`` (a node finished a step) or ``token`` (model output as it is generated)."""
    data: dict[str, Any]


class ProgressLog(Protocol):
    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        """Store entries; an entry whose key is stored already is skipped (a retried write)."""
        ...

    async def after(
        self, project_id: str, execution_id: str, key: str, *, limit: int = PROGRESS_PAGE
    ) -> list[ProgressEntry]:
        """Entries with a key greater than ``key`` ("" for all), in key order."""
        ...
