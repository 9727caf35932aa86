"""MongoDB adapter of shared/store/threads.py.

One document per thread, ``_id`` = ``thread_key`` (project, workspace, thread): creating is an
insert, atomic on FerretDB too. Like the other collections, the fields queries use are top-level
and the whole record is JSON text in ``body``, so the caller's metadata never becomes document
keys (FerretDB rejects keys with ``.`` or a leading ``$``). The creation time is kept as
``created_key``, text that sorts like the time, at full precision (a BSON date would keep
milliseconds).

The turns hint is the top-level field ``turns``, beside ``body`` (whose JSON leaves it out): a
note is a ``$max`` of it, a metadata update a ``$set`` of ``body``, and neither names the other's
field, so on MongoDB neither can undo the other. FerretDB 1.x writes a whole document back on
every update, so there a note racing a metadata update may undo it (see ``note_turn``). Both are
updates of one document by ``_id``, without upsert, so a thread that does not exist stays so.
Documents written before the field existed read as 0.

The retention fields are top-level too, beside ``body`` (whose JSON leaves them out, as it does
``turns``): ``ttl_minutes``, and ``expires_at``, a BSON date (the record keeps it to the
millisecond, as a date does: ``expiry_time``), absent when the thread has none. A turn's note
moves it in its one update (``$max`` of both fields); ``set_ttl`` sets or unsets both;
``mark_deleted`` sets the expiry to the deletion time (a tombstone's erasure is due:
shared/store/threads.py) and unsets the ttl, in the mark's one update; ``erasure_done`` unsets
the expiry of a tombstone (one update, filtered on ``deleted: true``); a metadata update names
neither. ``expired`` is one query of the index ``expiring`` (``expires_at``): a range from the
oldest date to now, in its order, which a document without the field (null, in the index) is
never in; live threads and tombstones alike. On FerretDB 1.x, which writes a whole document back
per update, a note or ``set_ttl`` racing a mark may undo it (the thread is then live again,
with its expiry), and a note racing ``erasure_done`` may give the tombstone its expiry back
(its erasure is then done again: erasing is idempotent).

``list`` and ``get_many`` filter on ``project_id`` and ``workspace_id``, the index's leading
fields: FerretDB 1.x (as ``infra/`` patches it) reads the workspace's threads through the index
and sorts them itself.

A tombstone (``mark_deleted``) is the same document with ``deleted: true`` beside its body, so
``list`` leaves tombstones out on the server and pages over live threads only. ``list`` reads
the index ``listed_live`` (project, workspace, ``deleted``, then the order): tombstones are kept
for good, and with ``deleted`` ahead of the order MongoDB never reads them to list a workspace,
however many there are. Documents written before the field (this release's adoption writes it,
the previous one's gateways do not during a rolling upgrade) have none: ``{deleted: {$in:
[false, null]}}`` matches them too, two points of the index, which MongoDB merges in order.

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
from datetime import datetime
from typing import Any

from pymongo import DESCENDING, ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.errors import StoreUnavailable
from shared.store.threads import (
    ThreadRecord,
    body_json,
    check_page,
    check_turn,
    created_key,
    expiry_time,
    thread_key,
)

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
        "body": body_json(thread),
        "turns": thread.turns,
        "deleted": thread.deleted,
        **_retention(thread.ttl_minutes, thread.expires_at)["$set"],
    }


def _retention(ttl_minutes: float | None, expires_at: datetime | None) -> Document:
    """The update giving a thread this ttl and expiry: a field without one is absent (so a
    filter on the expiry never meets a null, and a ``$max`` of it always takes the note's)."""
    fields = {
        "ttl_minutes": None if ttl_minutes is None else float(ttl_minutes),
        "expires_at": None if expires_at is None else expiry_time(expires_at),
    }
    update: Document = {"$set": {k: v for k, v in fields.items() if v is not None}}
    if unset := {k: "" for k, v in fields.items() if v is None}:
        update["$unset"] = unset
    return update


LIVE: Document = {"deleted": {"$in": [False, None]}}
"""Not a tombstone: ``None`` also matches a document written before the field existed."""


def _thread(document: Document) -> ThreadRecord:
    # The previous release's documents, and this one's from before turns or retention, have no
    # field. The client is tz_aware (store.py): the expiry reads back an aware UTC time.
    record = ThreadRecord.model_validate_json(document["body"])
    return record.model_copy(
        update={
            "turns": document.get("turns", 0),
            "ttl_minutes": document.get("ttl_minutes"),
            "expires_at": document.get("expires_at"),
        }
    )


class MongoThreads:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["threads"]

    async def ensure_indexes(self) -> None:
        # The index before tombstones stays: gateways of the previous release list through it
        # during a rolling upgrade, and dropping it would take a privilege the migrator lacks.
        await self._collection.create_index(
            [
                ("project_id", 1),
                ("workspace_id", 1),
                ("created_key", DESCENDING),
                ("thread_id", DESCENDING),
            ]
        )
        await self._collection.create_index(
            [
                ("project_id", 1),
                ("workspace_id", 1),
                ("deleted", 1),
                ("created_key", DESCENDING),
                ("thread_id", DESCENDING),
            ],
            name="listed_live",
        )
        await self._collection.create_index([("expires_at", 1)], name="expiring")
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
        # Twice at most: a delete between this insert's conflict and the read frees the id, and
        # the create then creates (a create after the delete). Deleted a second time in that
        # window, the id is being fought over: the caller is told to retry.
        for _ in range(2):
            try:
                await self._collection.insert_one(dict(document))
            except DuplicateKeyError:
                stored = await self._collection.find_one({"_id": document["_id"]})
                if stored is not None:
                    return _thread(stored), False
                continue
            return thread, True
        raise StoreUnavailable(f"the thread {thread.thread_id!r} was deleted during its create")

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

    async def note_turn(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        turn: int,
        *,
        expires_at: datetime | None = None,
    ) -> None:
        check_turn(turn)
        # FerretDB 1.x applies an update by reading the document and writing all of it back, not
        # atomically: of concurrent notes one may lose another's greater turn, so the hint
        # trails, as hints may (it never holds a turn nobody noted, so it never leads). That
        # write-back can also undo a concurrent metadata update (measured: most of 50 contended
        # rounds), which MongoDB's per-document atomic updates never do. The filter keeps a note
        # of a turn already noted from writing at all, which leaves that race to the first note
        # of each turn; ``$not`` also matches a document from before the field existed.
        key = thread_key(project_id, workspace_id, thread_id)
        if expires_at is None:
            await self._collection.update_one(
                {"_id": key, "turns": {"$not": {"$gte": turn}}}, {"$max": {"turns": turn}}
            )
            return
        # The expiry in the same update (one command on every turn's path): a ``$max`` as the
        # turn's, so a late note never brings it forward, and a missing field takes the note's.
        # A live thread's only: a tombstone is left as it is, hint and all (the hint may trail).
        later = expiry_time(expires_at)
        await self._collection.update_one(
            {
                "_id": key,
                **LIVE,
                "$or": [
                    {"turns": {"$not": {"$gte": turn}}},
                    {"expires_at": {"$not": {"$gte": later}}},
                ],
            },
            {"$max": {"turns": turn, "expires_at": later}},
        )

    async def set_ttl(
        self,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        ttl_minutes: float | None,
        expires_at: datetime | None,
    ) -> ThreadRecord | None:
        # One findAndModify of a live thread, writing the two fields only (not ``body``), so it
        # undoes no metadata update nor note on MongoDB. A tombstone is not matched: it is read
        # back unchanged, as is the absence of any thread.
        key = thread_key(project_id, workspace_id, thread_id)
        document = await self._collection.find_one_and_update(
            {"_id": key, **LIVE},
            _retention(ttl_minutes, expires_at),
            return_document=ReturnDocument.AFTER,
        )
        if document is not None:
            return _thread(document)
        again = await self.get(project_id, workspace_id, thread_id)
        return again if again is not None and again.deleted else None

    async def expired(self, now: datetime, *, limit: int) -> list[ThreadRecord]:
        check_page(limit, 0)
        if limit == 0:  # to the server, a limit of 0 is no limit
            return []
        # Tombstones too, with no filter on ``deleted``: a tombstone's expiry is its erasure due
        # (the caller reads ``deleted``). One range of ``expiring``, in its order.
        found = (
            self._collection.find({"expires_at": {"$lte": now}})
            .sort([("expires_at", 1)])
            .limit(limit)
        )
        return [_thread(d) async for d in found]

    async def set_metadata(
        self, project_id: str, workspace_id: str, thread_id: str, metadata: dict[str, Any]
    ) -> ThreadRecord | None:
        key = thread_key(project_id, workspace_id, thread_id)
        stored = await self._collection.find_one({"_id": key})
        if stored is None:
            return None
        # The rest of the record never changes, so the body read is the body to update; the
        # filter on its creation time leaves alone a thread deleted and created again meanwhile.
        # Of concurrent updates the last writer wins. ``turns`` is not written: it is the field's.
        # A tombstone keeps its empty metadata: the filter also leaves alone one marked meanwhile
        # (on MongoDB; FerretDB's conditional update is not atomic, so there for a racing moment).
        current = _thread(stored)
        if current.deleted:
            return current
        updated = current.model_copy(update={"metadata": metadata})
        document = await self._collection.find_one_and_update(
            {"_id": key, "created_key": stored["created_key"], **LIVE},
            {"$set": {"body": body_json(updated)}},
            return_document=ReturnDocument.AFTER,
        )
        if document is not None:
            return _thread(document)
        # Deleted since the read (None, as for no thread), or marked: the tombstone, unchanged.
        again = await self.get(project_id, workspace_id, thread_id)
        return again if again is not None and again.deleted else None

    async def mark_deleted(
        self, project_id: str, workspace_id: str, thread_id: str, at: datetime
    ) -> ThreadRecord | None:
        key = thread_key(project_id, workspace_id, thread_id)
        # Twice at most, as ``create``: a thread deleted and created again between the read and
        # the update is read and marked again; a second time in that window, the caller retries.
        for _ in range(2):
            stored = await self._collection.find_one({"_id": key})
            if stored is None:
                return None
            current = _thread(stored)
            if current.deleted:  # marked already: the first mark's time and the expiry stay
                return current
            tombstone = current.model_copy(update={"metadata": {}, "deleted_at": at})
            # Only a live thread of this creation is marked, so of concurrent marks the first
            # one's time stays (on MongoDB: FerretDB's conditional update is not atomic, so there
            # racing marks may each write theirs). ``turns`` is not written: it is the field's.
            # In the same update, the erasure is due now: the expiry is the deletion time.
            document = await self._collection.find_one_and_update(
                {"_id": key, "created_key": stored["created_key"], **LIVE},
                {
                    "$set": {
                        "body": body_json(tombstone),
                        "deleted": True,
                        "expires_at": expiry_time(at),
                    },
                    "$unset": {"ttl_minutes": ""},  # a tombstone has no ttl
                },
                return_document=ReturnDocument.AFTER,
            )
            if document is not None:
                return _thread(document)
        raise StoreUnavailable(f"the thread {thread_id!r} was replaced during its delete")

    async def erasure_done(self, project_id: str, workspace_id: str, thread_id: str) -> None:
        # One update, of a tombstone only (a live thread's expiry is its ttl's). The filter on
        # the field also keeps a tombstone erased already from being written again: on FerretDB
        # each write is a whole document written back, which could undo a racing note's hint.
        await self._collection.update_one(
            {
                "_id": thread_key(project_id, workspace_id, thread_id),
                "deleted": True,
                "expires_at": {"$exists": True},
            },
            {"$unset": {"expires_at": ""}},
        )

    async def delete(self, project_id: str, workspace_id: str, thread_id: str) -> bool:
        # The hint is a field of the document: it goes with it. A version 1 original of the
        # thread stays, marked adopted, for the previous release's gateways: never adopted again.
        deleted = await self._collection.delete_one(
            {"_id": thread_key(project_id, workspace_id, thread_id)}
        )
        return deleted.deleted_count > 0

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
                    **LIVE,
                }
            )
            .sort([("created_key", DESCENDING), ("thread_id", DESCENDING)])
            .skip(offset)
            .limit(limit)
        )
        return [_thread(d) async for d in found]
