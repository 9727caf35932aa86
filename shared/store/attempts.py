"""Attempts: which run of a dispatch is the current one (the fencing token).

Every time the sandbox starts running a dispatch (epoch) it begins a new attempt: the first run,
a redelivery after a crash, another replica taking over a partition. Beginning attempt ``n + 1``
supersedes attempt ``n``; a superseded attempt (a replica paused past its lease that wakes up)
must not write checkpoints, step results or reports. Beginning is an insert under a unique
``_id``, so of two replicas racing for the same attempt number exactly one gets it.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Protocol

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.events import utc_now

MAX_BEGIN_RACES = 20


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class AttemptLedger(Protocol):
    async def begin(self, execution_id: str, epoch: int) -> int:
        """Start a new attempt at ``epoch``; return its number (1 for the first)."""
        ...

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        """Has a later attempt at this epoch begun?"""
        ...


def _attempt_id(execution_id: str, epoch: int, attempt: int) -> str:
    return f"{execution_id}:{epoch:010d}:{attempt:06d}"


class InMemoryAttemptLedger:
    def __init__(self) -> None:
        self._latest: dict[tuple[str, int], int] = {}

    async def begin(self, execution_id: str, epoch: int) -> int:
        attempt = self._latest.get((execution_id, epoch), 0) + 1
        self._latest[(execution_id, epoch)] = attempt
        return attempt

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        return self._latest.get((execution_id, epoch), 0) > attempt


class MongoAttemptLedger:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["attempts"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index(
            [("execution_id", 1), ("epoch", 1), ("attempt", DESCENDING)], name="by_epoch_attempt"
        )

    async def begin(self, execution_id: str, epoch: int) -> int:
        # Attempts are numbered from 1 under their ``_id``: the next free number is found by
        # point reads (FerretDB would scan the collection for a query by fields).
        attempt = 1
        for _ in range(MAX_BEGIN_RACES):
            while await self._collection.find_one(
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
