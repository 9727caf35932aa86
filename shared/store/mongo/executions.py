"""Executions on MongoDB: an insert-only log of versions (the compare-and-set), a head per
execution (its newest version, read by ``_id``), markers of the executions that wait (the
sweeps' and the pending-reviews list's, ``markers.py``), and decision claims."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReplaceOne
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.domain.execution import Execution, ExecutionStatus
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.mongo.compression import compressed, decompressed
from shared.store.mongo.markers import WaitingMarkers, deadline_key, undelivered_key
from shared.store.ports import Claim, Page, Written

Document = dict[str, Any]


def _scope_fields(execution: Execution, *, compress: bool) -> Document:
    return {
        "schema_version": execution.schema_version,
        "execution_id": execution.execution_id,
        "project_id": execution.project_id,
        "workspace_id": execution.workspace_id,
        "status": execution.status.value,
        "version": execution.version,
        "created_key": execution.created_at.isoformat(),
        # Read by no query of this version (the markers serve the sweeps); kept while older
        # orchestrators, whose sweeps query them, may still run during an upgrade.
        "deadline_key": deadline_key(execution),
        "undelivered_key": undelivered_key(execution),
        **_body(execution, compress=compress),
    }


def _body(execution: Execution, *, compress: bool) -> Document:
    """The execution itself: its JSON, compressed (``body_zlib``) once big enough, which an
    ended execution holding its final state is (shared/store/mongo/compression.py)."""
    text = execution.model_dump_json()
    packed = compressed(text.encode(), enabled=compress)
    return {"body": text} if packed is None else {"body_zlib": packed}


def _version_id(execution_id: str, version: int) -> str:
    # Fixed-width suffix: two different (execution, version) pairs never share an _id.
    return f"{execution_id}:{version:012d}"


def _from_document(document: Document) -> Execution:
    packed = document.get("body_zlib")
    if packed is not None:
        return Execution.model_validate_json(decompressed(packed))
    return Execution.model_validate_json(document["body"])


def stored_execution(document: Document) -> Execution | None:
    """The execution a document of ``executions`` or ``execution_versions`` holds, in either
    form; None for the stub of a superseded version (for readers of the raw collections: the
    chaos suite's ledger)."""
    if "body" not in document and "body_zlib" not in document:
        return None
    return _from_document(document)


def _stub(execution: Execution, version: int) -> Document:
    """What an old version of an ended execution is cut down to: its ``_id`` stays taken, and
    it names the version that superseded it."""
    return {
        "schema_version": execution.schema_version,
        "execution_id": execution.execution_id,
        "version": version,
        "superseded_by": execution.version,
    }


HEAD_WRITE_ATTEMPTS = 5


class MongoExecutionStore:
    """Executions as an append-only log of versions, plus a head: each execution's newest version.

    The compare-and-set is an insert of the successor version under a unique ``_id``
    (``<execution>:<version>``): of concurrent writers exactly one succeeds, on every
    MongoDB-compatible server. Conditional updates (``replace_one`` / ``find_one_and_update``
    with a version in the filter) are not atomic on FerretDB 1.x: under concurrency several
    writers "win" (measured: 97 of 100 contended rounds), so they are not used for this.

    ``create`` is one insert, of the head (version 1 is the head's first content). A write is two
    commands: the insert, then the head (``findAndModify`` by ``_id``, which hands back the head
    it replaced). A read is two point reads: the head, then the version after it (normally
    absent); one with ``min_epoch`` while the head is that new. Nothing on these paths filters
    on anything but ``_id`` (FerretDB answers any other filter by scanning the collection).

    - **The head may trail the log**, never lead it: between a writer's insert and its head
      write, or for good if the writer dies in between. Reads therefore go on from the head
      through the log while there is a next version (and then write the head they found
      behind); a later write or read repairs it.
    - **The head does not go back for long.** A slow writer can put an older version over a
      newer head; the replaced head it gets back says so, and it puts the newest back at once.
    - **No version's ``_id`` is ever freed.** When an execution ends, its older versions are cut
      down to stubs naming the newest, in one ``update`` command; they are not deleted. A writer
      that compare-and-sets on an old version (an orchestrator's cached copy, a trailing head)
      must lose, however many versions came after: a deleted ``_id`` would let its insert
      succeed and fork the execution. For the same reason ``create`` stays insert-if-absent
      (the head's ``_id``) forever.
    - **Sweeps and the pending-reviews list read markers, not heads** (``markers.py``): a
      filter on the heads would scan every execution ever stored on FerretDB. A version that
      starts or stops waiting (a suspension, a request the gateway could not deliver) writes
      its marker around its compare-and-set; executions that wait on nothing write none.
    """

    def __init__(self, database: AsyncDatabase[Document], *, compress: bool = True) -> None:
        self._compress = compress
        self._versions = database["execution_versions"]
        self._heads = database["executions"]
        self._markers = WaitingMarkers(database, self._read)

    async def _read(
        self, project_id: str, execution_id: str, min_epoch: int | None
    ) -> Execution | None:
        return await self.get(project_id, execution_id, min_epoch=min_epoch)

    async def ensure_indexes(self) -> None:
        await self._versions.create_index(
            [("execution_id", ASCENDING), ("version", DESCENDING)], name="by_execution_version"
        )
        await self._heads.create_index(
            [
                ("project_id", ASCENDING),
                ("workspace_id", ASCENDING),
                ("status", ASCENDING),
                ("created_key", ASCENDING),
                ("_id", ASCENDING),
            ],
            name="by_scope_status_created",
        )
        await self._heads.create_index(
            [("status", ASCENDING), ("deadline_key", ASCENDING)], name="by_status_deadline"
        )
        await self._markers.ensure_indexes(self._waiting_heads)

    async def _waiting_heads(self) -> AsyncIterator[Execution]:
        waiting = [ExecutionStatus.SUSPENDED.value, ExecutionStatus.PENDING.value]
        async for head in self._heads.find({"status": {"$in": waiting}}):
            yield _from_document(head)

    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        # One insert: version 1 is the head's first content (it is in the log only for
        # executions created before this layout). The head's ``_id`` is never freed, so create
        # stays insert-if-absent for good, and the compare-and-set of version 2 is the insert of
        # ``<execution>:2`` like any other. No head write to order: nobody else knows the
        # execution before this returns (the gateway publishes the request afterwards).
        first = execution.model_copy(update={"version": 1})
        await self._markers.before_write(None, first)  # a new request waits on nothing
        try:
            await self._heads.insert_one(
                {"_id": first.execution_id, **_scope_fields(first, compress=self._compress)}
            )
        except DuplicateKeyError:
            existing = await self._newest(execution.execution_id)
            if existing is None:  # heads are never deleted: a bug, not a race
                raise
            return _from_document(existing), False
        return first, True

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        if min_epoch is not None:
            head = await self._heads.find_one({"_id": execution_id})
            if head is not None:
                execution = _from_document(head)
                if execution.epoch >= min_epoch:
                    return execution if execution.project_id == project_id else None
            newest = await self._newest_from_head(execution_id, head)
        else:
            newest = await self._newest(execution_id)
        if newest is None or newest["project_id"] != project_id:
            return None
        return _from_document(newest)

    async def replace(self, current: Execution, successor: Execution) -> Execution | None:
        written = await self.compare_and_set(current, successor)
        if written is None:
            return None
        await written.settle()
        return written.execution

    async def compare_and_set(self, current: Execution, successor: Execution) -> Written | None:
        if successor.execution_id != current.execution_id:
            raise ValueError("a successor must be of the same execution")
        stored = successor.model_copy(update={"version": current.version + 1})
        document = {
            "_id": _version_id(stored.execution_id, stored.version),
            **_scope_fields(stored, compress=self._compress),
        }
        # With the compare-and-set, not after it: a marker without its version (the insert
        # lost, or failed) is checked and removed; a writer that dies after the insert and
        # before its marker is written has not acknowledged what it handled, whose redelivery
        # makes the marker again (``mark_waiting``).
        marking = self._markers.before_write(current, stored)
        try:
            await _together(self._versions.insert_one(document), marking)
        except DuplicateKeyError:
            return None

        async def settle() -> None:
            # The head may trail the log meanwhile (every reader goes past a trailing head), and
            # the marker of what this version stopped waiting on stays a moment longer (every
            # reader checks a marker against its execution).
            await self._write_head(document)
            await self._markers.after_write(current, stored)
            if stored.status.is_terminal:
                await self._prune(stored)

        return Written(stored, settle)

    async def mark_waiting(self, execution: Execution) -> None:
        await self._markers.before_write(None, execution)

    async def unchanged_since(self, execution_id: str, version: int) -> bool:
        # The version after it, by ``_id``: absent while ``version`` is the newest (ids are
        # never freed, so a pruned successor still answers as a stub).
        successor = await self._versions.find_one(
            {"_id": _version_id(execution_id, version + 1)}, {"_id": 1}
        )
        return successor is None

    async def _newest(self, execution_id: str) -> Document | None:
        return await self._newest_from_head(
            execution_id, await self._heads.find_one({"_id": execution_id})
        )

    async def _newest_from_head(self, execution_id: str, head: Document | None) -> Document | None:
        """The newest version: the head, then the versions after it while there are any (one
        miss when the head is current). A head found behind is written. (Without a head there
        is no execution, but for one created before this layout, whose creator died between
        its version 1 and its head: that is read from the log and its head written.)"""
        start = head or await self._versions.find_one({"_id": _version_id(execution_id, 1)})
        if start is None:
            return None
        newest = await self._after(start)
        if head is None or newest["version"] != head["version"]:
            await self._write_head(newest)
        return newest

    async def _after(self, document: Document) -> Document:
        """The newest version from ``document`` on."""
        document = await self._whole(document)
        while True:
            successor = await self._versions.find_one(
                {"_id": _version_id(document["execution_id"], document["version"] + 1)}
            )
            if successor is None:
                return document
            document = await self._whole(successor)

    async def _whole(self, document: Document) -> Document:
        """``document`` itself, or for a stub the version that superseded it."""
        while "superseded_by" in document:
            newer = await self._versions.find_one(
                {"_id": _version_id(document["execution_id"], document["superseded_by"])}
            )
            if newer is None:  # a stub names a version inserted before it: a bug, not a race
                raise RuntimeError(f"{document['_id']} names a missing version")
            document = newer
        return document

    async def _write_head(self, document: Document) -> None:
        """Point the head at ``document``. The head it replaced comes back in the same command:
        when it was newer (this writer was slow, another wrote meanwhile), the newest version
        is put back. Two writes racing inside the server can still leave an older head (FerretDB
        reads and writes back); reads go past a trailing head, and the next write or read
        repairs it."""
        execution_id = document["execution_id"]
        for _ in range(HEAD_WRITE_ATTEMPTS):
            fields = {k: v for k, v in document.items() if k != "_id"}
            try:
                replaced = await self._heads.find_one_and_replace(
                    {"_id": execution_id}, fields, upsert=True
                )
            except DuplicateKeyError:
                continue  # a concurrent first write of this head inserted it: write again
            if replaced is None or replaced["version"] <= document["version"]:
                return
            document = await self._after(replaced)

    async def _prune(self, ended: Execution) -> None:
        """Cut every version before ``ended`` down to a stub, in one command (a bulk write of
        one kind is one command on the wire; version 1 is in the log only for executions of the
        previous layout, and its statement matches nothing otherwise). A writer that dies first
        leaves them whole: kept, never wrong."""
        if ended.version > 1:
            await self._versions.bulk_write(
                [
                    ReplaceOne({"_id": _version_id(ended.execution_id, v)}, _stub(ended, v))
                    for v in range(1, ended.version)
                ],
                ordered=False,
            )

    async def due_deadlines(self, now: datetime, *, limit: int = 100) -> list[Execution]:
        return await self._markers.due_deadlines(now, limit)

    async def undelivered_before(self, cutoff: datetime, *, limit: int = 100) -> list[Execution]:
        return await self._markers.undelivered_before(cutoff, limit)

    async def count_live_by_status(self) -> dict[ExecutionStatus, int]:
        # One count per status, an equality on ``status``: MongoDB answers it from the index on
        # (status, deadline_key), and FerretDB on PostgreSQL from the GIN index its infra/ patch
        # 0002 adds next to it, so only the live executions are read, whatever the history
        # (stock FerretDB scans: 20 ms at 20,000 executions; the grouped aggregate this replaced
        # decoded every document in Go: 1 s). Ended statuses are not counted: they are history.
        counts = {}
        for status in ExecutionStatus:
            if not status.is_terminal:
                found = await self._heads.count_documents({"status": status.value})
                if found:
                    counts[status] = found
        return counts

    async def list(
        self,
        project_id: str,
        workspace_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        if status is ExecutionStatus.SUSPENDED:
            return await self._markers.pending_reviews(project_id, workspace_id, limit, cursor)
        query: Document = {"project_id": project_id, "workspace_id": workspace_id}
        if status is not None:
            query["status"] = status.value
        if cursor:
            after_key, after_id = decode_cursor(cursor)
            query["$or"] = [
                {"created_key": {"$gt": after_key}},
                {"created_key": after_key, "_id": {"$gt": after_id}},
            ]
        found = self._heads.find(query).sort([("created_key", 1), ("_id", 1)]).limit(limit + 1)
        items = [_from_document(d) async for d in found]
        page, more = items[:limit], len(items) > limit
        next_cursor = None
        if more and page:
            last = page[-1]
            next_cursor = encode_cursor(last.created_at.isoformat(), last.execution_id)
        return Page(page, next_cursor)


class MongoDecisionClaims:
    """One document per suspension; its ``_id`` makes a second claim impossible."""

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["decision_claims"]

    async def claim(self, execution_id: str, suspension_id: int, claim: Claim) -> Claim:
        key = f"{execution_id}:{suspension_id}"
        try:
            await self._collection.insert_one(
                {"_id": key, "decision_id": claim.decision_id, "payload": claim.payload}
            )
            return claim
        except DuplicateKeyError:
            holder = await self.holder(execution_id, suspension_id)
            if holder is None:  # claims are never deleted: a bug, not a race
                raise
            return holder

    async def holder(self, execution_id: str, suspension_id: int) -> Claim | None:
        found = await self._collection.find_one({"_id": f"{execution_id}:{suspension_id}"})
        if found is None:
            return None
        return Claim(decision_id=str(found["decision_id"]), payload=str(found["payload"]))


async def _together(first: Awaitable[Any], second: Awaitable[Any]) -> None:
    """Both at once; each finishes before the first failure is raised (the insert's first)."""
    for result in await asyncio.gather(first, second, return_exceptions=True):
        if isinstance(result, BaseException):
            raise result
