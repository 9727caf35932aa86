"""MongoDB adapter of shared/store/threads.py.

One document per thread, ``_id`` = ``thread_key`` (project, workspace, thread): creating is an
insert, atomic on FerretDB too. Like the other collections, the fields queries use are top-level
and the whole record is JSON text in ``body``, so the caller's metadata never becomes document
keys (FerretDB rejects keys with ``.`` or a leading ``$``). The creation time is kept as
``created_key``, text that sorts like the time, at full precision (a BSON date would keep
milliseconds).

``list`` and ``get_many`` filter on ``project_id`` and ``workspace_id``, the index's leading
fields: FerretDB 1.x (as ``infra/`` patches it) reads the workspace's threads through the index
and sorts them itself.

Documents of the previous release (``schema_version`` 1) are keyed ``<project>/<thread>``.
``ensure_indexes`` adopts them at every start-up (one query, never per request): each is copied
under its (project, workspace, thread) key, in the workspace it was created in, and marked
``adopted``. The original stays, for gateways of the previous release still serving during a
rolling upgrade (they read it by its old key); run at every start, adoption also takes in what
such a gateway creates meanwhile. No read of this version returns a version 1 document: ``get``
reads by the new key, ``get_many`` by new keys, ``list`` asks for ``schema_version`` 2. Once no
gateway of the previous release runs, the version 1 documents can be deleted
(docs/langgraph-api.md, "Upgrading").
"""

from __future__ import annotations

import contextlib
from typing import Any

from pymongo import DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.threads import ThreadRecord, check_page, created_key, thread_key

SCHEMA_VERSION = 2
"""2: keyed by (project, workspace, thread). 1: by (project, thread), the previous release."""

Document = dict[str, Any]


def _document(thread: ThreadRecord) -> Document:
    return {
        "_id": thread_key(thread.project_id, thread.workspace_id, thread.thread_id),
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
        await self.adopt_previous()

    async def adopt_previous(self) -> int:
        """Copy every thread the previous release stored, not adopted yet, under its
        workspace's key; return how many. FerretDB pushes ``$ne`` down (see
        shared/store/mongo/approvals.py); once adopted, nothing matches."""
        found = self._collection.find(
            {"schema_version": {"$ne": SCHEMA_VERSION}, "adopted": {"$ne": True}}
        )
        # Read to the end before writing: the writes take documents out of the query's answer.
        previous = [document async for document in found]
        for document in previous:
            # A duplicate: adopted by another replica starting at the same time.
            with contextlib.suppress(DuplicateKeyError):
                await self._collection.insert_one(_document(_thread(document)))
            # The same value from every writer, on a document nothing else changes: a lost
            # update of FerretDB's non-atomic $set loses nothing.
            await self._collection.update_one({"_id": document["_id"]}, {"$set": {"adopted": True}})
        return len(previous)

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

    async def get(self, project_id: str, workspace_id: str, thread_id: str) -> ThreadRecord | None:
        key = thread_key(project_id, workspace_id, thread_id)
        document = await self._collection.find_one({"_id": key})
        return _thread(document) if document is not None else None

    async def get_many(
        self, project_id: str, workspace_id: str, thread_ids: list[str]
    ) -> dict[str, ThreadRecord]:
        if not thread_ids:
            return {}
        keys = [thread_key(project_id, workspace_id, thread_id) for thread_id in thread_ids]
        # FerretDB 1.x scans for an ``$in``; the equalities on the index's leading fields narrow
        # that to the workspace's threads (MongoDB reads ``_id``'s index).
        found = self._collection.find(
            {"project_id": project_id, "workspace_id": workspace_id, "_id": {"$in": keys}}
        )
        threads = [_thread(d) async for d in found]
        return {t.thread_id: t for t in threads}

    async def list(
        self, project_id: str, workspace_id: str, *, limit: int, offset: int = 0
    ) -> list[ThreadRecord]:
        check_page(limit, offset)
        if limit == 0:  # to the server, a limit of 0 is no limit
            return []
        found = (
            self._collection.find(
                {
                    "project_id": project_id,
                    "workspace_id": workspace_id,
                    "schema_version": SCHEMA_VERSION,
                }
            )
            .sort([("created_key", DESCENDING), ("thread_id", DESCENDING)])
            .skip(offset)
            .limit(limit)
        )
        return [_thread(d) async for d in found]
