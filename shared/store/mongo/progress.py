"""MongoDB adapter of shared/store/progress.py."""

from __future__ import annotations

import json
import logging
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import BulkWriteError, OperationFailure

from shared.events import utc_now
from shared.store.progress import PROGRESS_PAGE, PROGRESS_TTL, ProgressEntry

log = logging.getLogger(__name__)

DUPLICATE_KEY = 11000


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
        self, project_id: str, execution_id: str, key: str, *, limit: int = PROGRESS_PAGE
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
