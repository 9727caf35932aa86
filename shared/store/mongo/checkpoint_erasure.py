"""The LangGraph checkpoints of executions, removed with a deleted thread.

The sandbox's saver (services/sandbox/mongo_checkpoints.py) writes them, one checkpoint thread
per execution; the orchestrator erases a deleted thread's executions, and services import no
other service, so the collections' names live here, for both. Every document of the four
carries the ``thread_id`` it belongs to (what the saver's own ``adelete_thread`` removes by).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

CHECKPOINTS = "checkpoints"
HEADS = "checkpoint_heads"
WRITE_SETS = "checkpoint_write_sets"
LEGACY_WRITES = "checkpoint_writes"


async def erase_checkpoints(database: AsyncDatabase[Any], thread_ids: Sequence[str]) -> int:
    """Remove every checkpoint, head and write of these checkpoint threads (one command per
    collection); how many documents went. Removing what is gone is a no-op."""
    if not thread_ids:
        return 0
    removed = 0
    collections = (database[CHECKPOINTS], database[HEADS], database[WRITE_SETS])
    for collection in (*collections, database[LEGACY_WRITES]):
        result = await collection.delete_many({"thread_id": {"$in": list(thread_ids)}})
        removed += result.deleted_count
    return removed
