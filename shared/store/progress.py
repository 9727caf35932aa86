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

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, OperationFailure

from shared.events import utc_now

log = logging.getLogger(__name__)

PROGRESS_TTL = timedelta(days=7)
DUPLICATE_KEY = 11000


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
        self, project_id: str, execution_id: str, key: str, *, limit: int = 500
    ) -> list[ProgressEntry]:
        """Entries with a key greater than ``key`` ("" for all), in key order."""
        ...


class InMemoryProgressLog:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], dict[str, ProgressEntry]] = {}

    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        stored = self._entries.setdefault((project_id, execution_id), {})
        for entry in entries:
            stored.setdefault(entry.key, entry)

    async def after(
        self, project_id: str, execution_id: str, key: str, *, limit: int = 500
    ) -> list[ProgressEntry]:
        stored = self._entries.get((project_id, execution_id), {})
        return [stored[k] for k in sorted(stored) if k > key][:limit]


class MongoProgressLog:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["execution_progress"]

    async def ensure_indexes(self) -> None:
        try:
            await self._collection.create_index(
                [("created_at", ASCENDING)],
                name="expire_progress",
                expireAfterSeconds=int(PROGRESS_TTL.total_seconds()),
            )
        except OperationFailure as exc:
            # FerretDB 1.x has no TTL indexes: progress is then kept until deleted by hand.
            log.info("progress entries are kept without expiry: %s", exc.details or exc)

    async def append(
        self, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> None:
        if not entries:
            return
        now = utc_now()
        documents = [
            {
                # The _id sorts like the key within one execution: queries range over it.
                "_id": f"{execution_id}:{entry.key}",
                "project_id": project_id,
                "kind": entry.kind,
                # As JSON text: agent data may hold keys no MongoDB-compatible server accepts.
                "data": json.dumps(entry.data),
                "created_at": now,
            }
            for entry in entries
        ]
        try:
            await self._collection.insert_many(documents, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise

    async def after(
        self, project_id: str, execution_id: str, key: str, *, limit: int = 500
    ) -> list[ProgressEntry]:
        prefix = f"{execution_id}:"
        found = (
            self._collection.find(
                {
                    "_id": {"$gt": prefix + key, "$lt": prefix + "\uffff"},
                    "project_id": project_id,
                }
            )
            .sort("_id", ASCENDING)
            .limit(limit)
        )
        return [
            ProgressEntry(
                key=d["_id"].removeprefix(prefix), kind=d["kind"], data=json.loads(d["data"])
            )
            async for d in found
        ]
