"""MongoDB adapter of shared/store/attempts.py."""

from __future__ import annotations

from typing import Any

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now
from shared.store.attempts import owner_name

MAX_BEGIN_RACES = 20


def _attempt_id(execution_id: str, epoch: int, attempt: int) -> str:
    return f"{execution_id}:{epoch:010d}:{attempt:06d}"


class MongoAttemptLedger:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["attempts"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index(
            [("execution_id", 1), ("epoch", 1), ("attempt", DESCENDING)], name="by_epoch_attempt"
        )

    async def begin(self, execution_id: str, epoch: int) -> int:
        # Attempts are numbered from 1 under their ``_id``. Almost every epoch has one attempt,
        # so the insert of number 1 comes first; only when it is taken is the next free number
        # found, by point reads (FerretDB would scan the collection for a query by fields).
        attempt = 1
        for race in range(MAX_BEGIN_RACES):
            while race > 0 and await self._collection.find_one(
                {"_id": _attempt_id(execution_id, epoch, attempt)}, {"_id": 1}
            ):
                attempt += 1
            try:
                await self._collection.insert_one(
                    {
                        "_id": _attempt_id(execution_id, epoch, attempt),
                        "execution_id": execution_id,
                        "epoch": epoch,
                        "attempt": attempt,
                        "owner": owner_name(),
                        "started_at": utc_now(),
                    }
                )
                return attempt
            except DuplicateKeyError:
                continue  # another replica began this number first: take the next one
        raise RuntimeError(f"could not begin an attempt at {execution_id} epoch {epoch}")

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        later = await self._collection.find_one(
            {"_id": _attempt_id(execution_id, epoch, attempt + 1)}, {"_id": 1}
        )
        return later is not None
