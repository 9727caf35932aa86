"""MongoDB adapter (PyMongo's async API). Runs on MongoDB, Atlas and FerretDB.

Only broadly supported operations are used: single-document CRUD, unique indexes,
``find_one_and_update``-style conditional writes and simple sorted finds. No transactions and no
change streams.

Each execution is one document. Fields that queries filter or sort on are top-level; the whole
model is kept as a JSON string in ``body``. Agents put arbitrary keys into inputs, suspend contexts
and results, and servers differ on keys containing ``.`` or starting with ``$`` (FerretDB rejects
them), so agent-provided data never becomes document keys.
"""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError, PyMongoError

from shared.domain.execution import Execution, ExecutionStatus
from shared.errors import RetryableError
from shared.store.cursor import decode_cursor, encode_cursor
from shared.store.ports import Claim, Page

Document = dict[str, Any]


class StoreUnavailable(RetryableError):
    """The database did not answer or refused the operation for a transient reason."""


def _to_document(execution: Execution) -> Document:
    return {
        "_id": execution.execution_id,
        "schema_version": execution.schema_version,
        "project_id": execution.project_id,
        "workspace_id": execution.workspace_id,
        "status": execution.status.value,
        "version": execution.version,
        "created_key": execution.created_at.isoformat(),
        "body": execution.model_dump_json(),
    }


def _from_document(document: Document) -> Execution:
    return Execution.model_validate_json(document["body"])


class MongoExecutionStore:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["executions"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index(
            [
                ("project_id", ASCENDING),
                ("workspace_id", ASCENDING),
                ("status", ASCENDING),
                ("created_key", ASCENDING),
                ("_id", ASCENDING),
            ],
            name="by_scope_status_created",
        )

    async def create(self, execution: Execution) -> tuple[Execution, bool]:
        try:
            await self._collection.insert_one(_to_document(execution))
            return execution, True
        except DuplicateKeyError:
            existing = await self._collection.find_one({"_id": execution.execution_id})
            if existing is None:  # deleted in between: a caller bug, not a race to paper over
                raise
            return _from_document(existing), False

    async def get(self, project_id: str, execution_id: str) -> Execution | None:
        document = await self._collection.find_one({"_id": execution_id, "project_id": project_id})
        return _from_document(document) if document is not None else None

    async def replace(self, execution: Execution, *, expected_version: int) -> bool:
        result = await self._collection.replace_one(
            {"_id": execution.execution_id, "version": expected_version},
            _to_document(execution),
        )
        return result.matched_count == 1

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
        found = self._collection.find(query).sort([("created_key", 1), ("_id", 1)]).limit(limit + 1)
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
        await self._collection.update_one(
            {"_id": command_id}, {"$setOnInsert": {"sent": True}}, upsert=True
        )


class MongoStore:
    def __init__(self, client: AsyncMongoClient[Document], database_name: str) -> None:
        self._client = client
        self._database_name = database_name
        database = client[database_name]
        self.executions = MongoExecutionStore(database)
        self.decisions = MongoDecisionClaims(database)
        self.sent_commands = MongoSentCommands(database)

    @classmethod
    def connect(cls, uri: str, database_name: str, *, timeout_ms: int = 5_000) -> MongoStore:
        """Create the client; nothing is sent until the first operation."""
        client: AsyncMongoClient[Document] = AsyncMongoClient(
            uri,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            tz_aware=True,
            appname="interlock",
        )
        return cls(client, database_name)

    async def ensure_indexes(self) -> None:
        await self.executions.ensure_indexes()

    async def ping(self) -> None:
        try:
            await self._client.admin.command("ping")
        except PyMongoError as exc:
            raise StoreUnavailable(f"database did not answer: {exc}") from exc

    async def close(self) -> None:
        await self._client.close()
