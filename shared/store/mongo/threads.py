"""MongoDB adapter of shared/store/threads.py.

One document per thread, ``_id`` = ``thread_key``: creating is an insert, atomic on FerretDB too.
Like the other collections, the fields queries use are top-level and the whole record is JSON
text in ``body``, so the caller's metadata never becomes document keys (FerretDB rejects keys
with ``.`` or a leading ``$``). The creation time is kept as ``created_key``, text that sorts like
the time, at full precision (a BSON date would keep milliseconds).

``list`` and ``get_many`` filter on ``project_id``, the index's leading field: FerretDB 1.x (as
``infra/`` patches it) reads the project's threads through the index and sorts them itself.
"""

from __future__ import annotations

from typing import Any

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.threads import ThreadRecord, check_page, created_key, thread_key

SCHEMA_VERSION = 1

Document = dict[str, Any]


def _document(thread: ThreadRecord) -> Document:
    return {
        "_id": thread_key(thread.project_id, thread.thread_id),
        "schema_version": SCHEMA_VERSION,
        "project_id": thread.project_id,
        "workspace_id": thread.workspace_id,
        "thread_id": thread.thread_id,
        "created_key": created_key(thread),
        "body": thread.model_dump_json(),
    }


def _thread(document: Document) -> ThreadRecord:
    return ThreadRecord.model_validate_json(document["body"])


class MongoThreads:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["threads"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index(
            [
                ("project_id", 1),
                ("workspace_id", 1),
                ("created_key", DESCENDING),
                ("thread_id", DESCENDING),
            ]
        )

    async def create(self, thread: ThreadRecord) -> tuple[ThreadRecord, bool]:
        document = _document(thread)
        try:
            await self._collection.insert_one(document)
        except DuplicateKeyError:
            stored = await self._collection.find_one({"_id": document["_id"]})
            if stored is None:  # threads are never deleted: a bug, not a race
                raise
            return _thread(stored), False
        return thread, True

    async def get(self, project_id: str, thread_id: str) -> ThreadRecord | None:
        document = await self._collection.find_one({"_id": thread_key(project_id, thread_id)})
        return _thread(document) if document is not None else None

    async def get_many(self, project_id: str, thread_ids: list[str]) -> dict[str, ThreadRecord]:
        if not thread_ids:
            return {}
        keys = [thread_key(project_id, thread_id) for thread_id in thread_ids]
        # FerretDB 1.x scans for an ``$in``; the equality on ``project_id``, the leading field of
        # an index, narrows that to the project's threads (MongoDB reads ``_id``'s index).
        found = self._collection.find({"project_id": project_id, "_id": {"$in": keys}})
        threads = [_thread(d) async for d in found]
        return {t.thread_id: t for t in threads}

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        if limit == 0:  # to the server, a limit of 0 is no limit
            return []
        found = (
            self._collection.find({"project_id": project_id, "workspace_id": workspace_id})
            .sort([("created_key", DESCENDING), ("thread_id", DESCENDING)])
            .skip(offset)
            .limit(limit)
        )
        return [_thread(d) async for d in found]
