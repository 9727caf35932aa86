"""The step cache on MongoDB: one document per durable step, ``_id`` = the step's key."""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.ports import StepRecord

Document = dict[str, Any]


class MongoStepStore:
    """One document per durable step, ``_id`` = the step's key.

    ``put`` is an insert under that unique ``_id``: the only write FerretDB makes atomic, so of
    concurrent writers of one key exactly one stores its record and the others read it back.
    """

    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._collection = database["steps"]

    async def ensure_indexes(self) -> None:
        await self._collection.create_index([("execution_id", ASCENDING)], name="by_execution")

    async def load(self, execution_id: str) -> dict[str, StepRecord]:
        found = self._collection.find({"execution_id": execution_id})
        return {str(d["_id"]): _step_from_document(d) async for d in found}

    async def get(self, key: str) -> StepRecord | None:
        found = await self._collection.find_one({"_id": key})
        return None if found is None else _step_from_document(found)

    async def put(self, record: StepRecord) -> StepRecord:
        try:
            await self._collection.insert_one(_step_document(record))
            return record
        except DuplicateKeyError:
            stored = await self._collection.find_one({"_id": record.key})
            if stored is None:  # steps are never deleted: a bug, not a race
                raise
            return _step_from_document(stored)


def _step_document(record: StepRecord) -> Document:
    return {
        "_id": record.key,
        "execution_id": record.execution_id,
        "name": record.name,
        "result": record.result,
        "epoch": record.epoch,
        "attempt": record.attempt,
        "created_at": record.created_at,
    }


def _step_from_document(document: Document) -> StepRecord:
    return StepRecord(
        key=str(document["_id"]),
        execution_id=str(document["execution_id"]),
        name=str(document["name"]),
        result=str(document["result"]),
        epoch=int(document["epoch"]),
        attempt=int(document["attempt"]),
        created_at=document["created_at"],
    )
