"""Crons (shared/store/crons.py) on MongoDB: a document per cron in ``crons`` (``_id`` = the
cron's id), a document per tick fired in ``cron_ticks`` (``_id`` = the claim's id).

A claim is an insert under its id: the one write FerretDB makes atomic, and what fires a tick
once. ``set_fields`` is one ``$set`` of the named fields by ``_id`` and tenant, so the sweep
and a client never undo each other's change. The payload and the metadata are JSON text: a
client's keys may hold ``.`` or start with ``$``, which FerretDB refuses as document keys. The
sweep reads the index ``due`` (enabled, next run) and ``unstarted`` (started, claimed at: also
the old started claims it forgets, found there and deleted by ``_id``); the routes read
``listed`` (the tenant, then the creation time).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.crons import CronRecord, CronSort, Tenant, TickClaim, checked_fields

Document = dict[str, Any]
JSON_FIELDS = ("payload", "metadata")


def _stored(fields: Document) -> Document:
    """Fields of a cron as its document holds them."""
    return {
        name: json.dumps(value) if name in JSON_FIELDS else value for name, value in fields.items()
    }


def _cron(document: Document) -> CronRecord:
    fields = {name: value for name, value in document.items() if name != "_id"}
    for name in JSON_FIELDS:
        fields[name] = json.loads(fields[name])
    return CronRecord.model_validate({**fields, "cron_id": document["_id"]})


def _claim(document: Document) -> TickClaim:
    fields = {name: value for name, value in document.items() if name != "_id"}
    return TickClaim.model_validate({**fields, "claim_id": document["_id"]})


def _filter(
    tenant: Tenant, assistant_id: str | None, thread_id: str | None, enabled: bool | None
) -> Document:
    where: Document = {"project_id": tenant.project_id, "workspace_id": tenant.workspace_id}
    if assistant_id is not None:
        where["assistant_id"] = assistant_id
    if thread_id is not None:
        where["thread_id"] = thread_id
    if enabled is not None:
        where["enabled"] = enabled
    return where


class MongoCrons:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._crons = database["crons"]
        self._ticks = database["cron_ticks"]

    async def ensure_indexes(self) -> None:
        await self._crons.create_index(
            [("project_id", ASCENDING), ("workspace_id", ASCENDING), ("created_at", DESCENDING)],
            name="listed",
        )
        await self._crons.create_index(
            [("enabled", ASCENDING), ("next_run_date", ASCENDING)], name="due"
        )
        await self._ticks.create_index(
            [("started", ASCENDING), ("claimed_at", ASCENDING)], name="unstarted"
        )
        await self._ticks.create_index([("cron_id", ASCENDING), ("tick", ASCENDING)], name="of")

    async def create(self, cron: CronRecord) -> bool:
        fields = cron.model_dump(exclude={"cron_id"})
        try:
            await self._crons.insert_one({"_id": cron.cron_id, **_stored(fields)})
        except DuplicateKeyError:
            return False
        return True

    async def get(self, tenant: Tenant, cron_id: str) -> CronRecord | None:
        found = await self._crons.find_one({"_id": cron_id, **_filter(tenant, None, None, None)})
        return None if found is None else _cron(found)

    async def set_fields(self, tenant: Tenant, cron_id: str, fields: dict[str, Any]) -> bool:
        checked_fields(fields)
        where = {"_id": cron_id, **_filter(tenant, None, None, None)}
        if not fields:
            return await self._crons.find_one(where, {"_id": 1}) is not None
        updated = await self._crons.update_one(where, {"$set": _stored(fields)})
        return updated.matched_count == 1

    async def delete(self, tenant: Tenant, cron_id: str) -> bool:
        deleted = await self._crons.delete_one(
            {"_id": cron_id, **_filter(tenant, None, None, None)}
        )
        return deleted.deleted_count == 1

    async def search(
        self,
        tenant: Tenant,
        *,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        enabled: bool | None = None,
        limit: int = 10,
        offset: int = 0,
        sort_by: CronSort = "created_at",
        descending: bool = True,
    ) -> list[CronRecord]:
        direction = DESCENDING if descending else ASCENDING
        order = [("_id", direction)]
        if sort_by != "cron_id":
            order.insert(0, (sort_by, direction))
        cursor = self._crons.find(
            _filter(tenant, assistant_id, thread_id, enabled),
            sort=order,
            skip=offset,
            limit=limit,
        )
        return [_cron(document) async for document in cursor]

    async def count(
        self, tenant: Tenant, *, assistant_id: str | None = None, thread_id: str | None = None
    ) -> int:
        return await self._crons.count_documents(_filter(tenant, assistant_id, thread_id, None))

    async def due(self, now: datetime, *, limit: int = 100) -> list[CronRecord]:
        cursor = self._crons.find(
            {"enabled": True, "next_run_date": {"$lte": now}},
            sort=[("next_run_date", ASCENDING), ("_id", ASCENDING)],
            limit=limit,
        )
        return [_cron(document) async for document in cursor]

    async def claim_tick(self, claim: TickClaim) -> bool:
        try:
            await self._ticks.insert_one(
                {"_id": claim.claim_id, **claim.model_dump(exclude={"claim_id"})}
            )
        except DuplicateKeyError:
            return False
        return True

    async def mark_started(self, claim_id: str, execution_id: str | None = None) -> None:
        started: Document = {"started": True}
        if execution_id is not None:
            started["execution_id"] = execution_id
        await self._ticks.update_one({"_id": claim_id}, {"$set": started})

    async def forget_claims(self, claimed_before: datetime, *, limit: int = 100) -> int:
        old = [
            document["_id"]
            async for document in self._ticks.find(
                {"started": True, "claimed_at": {"$lt": claimed_before}},
                {"_id": 1},
                sort=[("claimed_at", ASCENDING), ("_id", ASCENDING)],
                limit=limit,
            )
        ]
        if not old:
            return 0
        deleted = await self._ticks.delete_many({"_id": {"$in": old}})
        return deleted.deleted_count

    async def unstarted(self, claimed_before: datetime, *, limit: int = 100) -> list[TickClaim]:
        cursor = self._ticks.find(
            {"started": False, "claimed_at": {"$lt": claimed_before}},
            sort=[("claimed_at", ASCENDING), ("_id", ASCENDING)],
            limit=limit,
        )
        return [_claim(document) async for document in cursor]

    async def claims_of(
        self, tenant: Tenant, cron_id: str, *, newest: int | None = None
    ) -> Sequence[TickClaim]:
        cursor = self._ticks.find(
            {"cron_id": cron_id, "project_id": tenant.project_id,
             "workspace_id": tenant.workspace_id},
            sort=[("tick", DESCENDING)],
            limit=newest or 0,
        )  # fmt: skip
        return [_claim(document) async for document in cursor][::-1]
