"""Executions on MongoDB: an insert-only log of versions (the compare-and-set), a head per
execution for listing, decision claims and sent-command marks."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.domain.execution import Execution, ExecutionStatus, next_deadline
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.ports import Claim, Page

Document = dict[str, Any]


def _scope_fields(execution: Execution) -> Document:
    return {
        "schema_version": execution.schema_version,
        "execution_id": execution.execution_id,
        "project_id": execution.project_id,
        "workspace_id": execution.workspace_id,
        "status": execution.status.value,
        "version": execution.version,
        "created_key": execution.created_at.isoformat(),
        "deadline_key": _deadline_key(execution),
        "undelivered_key": (
            None
            if execution.undelivered_since is None or execution.epoch != 0
            else _time_key(execution.undelivered_since)
        ),
        "body": execution.model_dump_json(),
    }


def _deadline_key(execution: Execution) -> str | None:
    """The next unfired deadline of a suspended execution, as sortable UTC text."""
    at = next_deadline(execution)
    return None if at is None else _time_key(at)


def _time_key(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _version_id(execution_id: str, version: int) -> str:
    # Fixed-width suffix: two different (execution, version) pairs never share an _id.
    return f"{execution_id}:{version:012d}"


def _from_document(document: Document) -> Execution:
    return Execution.model_validate_json(document["body"])


KEPT_VERSIONS = 3

"""Older versions are pruned (but version 1); the audit trail inside each version keeps the full
history."""

HEAD_REFRESH_ATTEMPTS = 5


class MongoExecutionStore:
    """Executions as an append-only log of versions, plus a head view for listing.

    The compare-and-set is an insert of the successor version under a unique ``_id``
    (``<execution>:<version>``): of concurrent writers exactly one succeeds, on every
    MongoDB-compatible server. Conditional updates (``replace_one`` / ``find_one_and_update``
    with a version in the filter) are not atomic on FerretDB 1.x: under concurrency several
    writers "win" (measured: 97 of 100 contended rounds), so they are not used for this.

    Reads of one execution come from the log. ``executions`` holds each execution's latest version
    for queries across executions (pending reviews); it is refreshed after every write and may
    trail the log by a moment.
    """

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._versions = database["execution_versions"]
        self._heads = database["executions"]

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

    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        first = execution.model_copy(update={"version": 1})
        document = {"_id": _version_id(first.execution_id, 1), **_scope_fields(first)}
        try:
            await self._versions.insert_one(document)
        except DuplicateKeyError:
            existing = await self._latest(execution.execution_id)
            if existing is None:  # pruned below version 1 cannot happen: a bug, not a race
                raise
            return _from_document(existing), False
        await self._refresh_head(document)
        return first, True

    async def get(self, project_id: str, execution_id: str) -> Execution | None:
        latest = await self._latest(execution_id)
        if latest is None or latest["project_id"] != project_id:
            return None
        return _from_document(latest)

    async def replace(self, execution: Execution, *, expected_version: int) -> bool:
        current = await self._versions.find_one(
            {"_id": _version_id(execution.execution_id, expected_version)}, {"_id": 1}
        )
        if current is None:
            return False
        successor = execution.model_copy(update={"version": expected_version + 1})
        document = {
            "_id": _version_id(successor.execution_id, successor.version),
            **_scope_fields(successor),
        }
        try:
            await self._versions.insert_one(document)
        except DuplicateKeyError:
            return False
        await self._refresh_head(document)
        # Version 1 is never pruned: its ``_id`` is what makes ``create`` insert-if-absent. Once
        # it was gone, a repeated request (a redelivery, an invoke retried with its idempotency
        # key, another project's event naming this id) created a second lineage of the id.
        # Each write prunes the one version that fell out of the window, by ``_id``; a writer
        # that dies first leaves that version behind (kept, never wrong: reads start at the head).
        pruned = successor.version - KEPT_VERSIONS
        if pruned > 1:
            await self._versions.delete_one({"_id": _version_id(successor.execution_id, pruned)})
        return True

    async def _latest(self, execution_id: str) -> Document | None:
        """The newest version, by point reads only (FerretDB answers a query on any field but
        ``_id`` by scanning the whole collection: 50 to 140 ms at 300 versions under load,
        against 3 to 5 ms by ``_id``): the head, then its successors while there are any. The
        head trails the log by at most the writes in flight, which the successors cover."""
        start = await self._heads.find_one({"_id": execution_id})
        if start is None:
            # No head yet (its creator died before writing it): the log from its first version.
            start = await self._versions.find_one({"_id": _version_id(execution_id, 1)})
            if start is None:
                return None
        return await self._successors_of(start)

    async def _successors_of(self, document: Document) -> Document:
        while True:
            successor = await self._versions.find_one(
                {"_id": _version_id(document["execution_id"], document["version"] + 1)}
            )
            if successor is None:
                return document
            document = successor

    async def _refresh_head(self, document: Document) -> None:
        """Point the head at the newest version, starting from the one just written. The head
        does not go back: a head already as new is left alone (compared here, since FerretDB
        scans the collection for any filter on ``_id`` plus another field). Two writers racing
        between that read and their write may still set an older head; each then carries it
        forward to any successor written meanwhile, so the head ends at the newest version."""
        execution_id = document["execution_id"]
        for _ in range(HEAD_REFRESH_ATTEMPTS):
            head = await self._heads.find_one({"_id": execution_id}, {"version": 1})
            if head is not None and head["version"] >= document["version"]:
                if head["version"] > document["version"]:
                    newer = await self._versions.find_one(
                        {"_id": _version_id(execution_id, head["version"])}
                    )
                    document = newer if newer is not None else document
            else:
                fields = {k: v for k, v in document.items() if k != "_id"}
                try:
                    await self._heads.replace_one({"_id": execution_id}, fields, upsert=True)
                except DuplicateKeyError:
                    continue  # a concurrent writer inserted the head first: compare again
            successor = await self._versions.find_one(
                {"_id": _version_id(execution_id, document["version"] + 1)}
            )
            if successor is None:
                return
            document = successor

    async def due_deadlines(self, now: datetime, *, limit: int = 100) -> list[Execution]:
        found = (
            self._heads.find(
                {
                    "status": ExecutionStatus.SUSPENDED.value,
                    "deadline_key": {"$lte": _time_key(now)},
                }
            )
            .sort([("deadline_key", ASCENDING)])
            .limit(limit)
        )
        return [_from_document(d) async for d in found]

    async def undelivered_before(self, cutoff: datetime, *, limit: int = 100) -> list[Execution]:
        found = (
            self._heads.find(
                {
                    "status": ExecutionStatus.PENDING.value,
                    "undelivered_key": {"$lte": _time_key(cutoff)},
                }
            )
            .sort([("undelivered_key", ASCENDING), ("_id", ASCENDING)])
            .limit(limit)
        )
        return [_from_document(d) async for d in found]

    async def count_by_status(self) -> dict[ExecutionStatus, int]:
        grouped = await self._heads.aggregate(
            [{"$group": {"_id": "$status", "count": {"$sum": 1}}}]
        )
        return {ExecutionStatus(d["_id"]): int(d["count"]) async for d in grouped}

    async def list(
        self,
        project_id: str,
        workspace_id: str,
        *,
        status: ExecutionStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
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
            holder = await self._collection.find_one({"_id": key})
            if holder is None:
                raise
            return Claim(decision_id=str(holder["decision_id"]), payload=str(holder["payload"]))


class MongoSentCommands:
    """One tiny document per published command, keyed by the command's deterministic id."""

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["sent_commands"]

    async def was_sent(self, command_id: str) -> bool:
        return await self._collection.find_one({"_id": command_id}, {"_id": 1}) is not None

    async def mark_sent(self, command_id: str) -> None:
        # Concurrent upserts of one new _id can both try the insert; the loser's duplicate key
        # error means the mark is there, which is all this asks.
        with contextlib.suppress(DuplicateKeyError):
            await self._collection.update_one(
                {"_id": command_id}, {"$setOnInsert": {"sent": True}}, upsert=True
            )
