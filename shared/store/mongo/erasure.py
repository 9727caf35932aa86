"""MongoDB adapter of shared/store/erasure.py: one ``delete`` command per collection for a batch
of executions, never one per execution or per record.

Every filter is on an indexed key. An execution's records are found by one of:

- its id, the ``_id`` of its head (``executions``), or the leading field of an index
  (``execution_versions``, ``steps``, ``attempts``, ``spent_links``): ``{field: {$in: ids}}``;
- the prefix of an ``_id`` made from it, ``<execution>:...`` (decision claims, progress,
  approvals and their slots, notification deliveries, outbox entries and claims, whose delivery
  id is ``<execution>:<suspension>:<channel>``) or ``<execution>|...`` (the waiting markers): a
  range of ``_id`` per execution, ``{$gte: id + sep, $lt: id + next(sep)}``, all of them in one
  ``$or``. The separator ends the prefix, so execution ``abc`` never takes ``abc1``'s records; an
  id holding a separator could take another's, and is refused.

FerretDB 1.x pushes neither ``$in`` nor ranges down to its backend, so there each command scans
its collection once: batching is what keeps erasing a thread of many turns to a few scans.

Not erased: ``threads`` (a thread outlives its turns as a tombstone), ``agent_versions`` and
``api_keys`` (an agent's, a key's: of no one execution), ``store_migrations``; LangGraph's
checkpoints are the saver's (see the port).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

Document = dict[str, Any]

BATCH = 256
"""Executions per command: a thread's turns in one, and no ``$or`` too large to plan."""
SEPARATORS = (":", "|")


@dataclass(frozen=True)
class _Records:
    """Where executions' records are in one collection: under ``field``, their execution's id
    (``$in``); or, with ``prefix_end``, under an ``_id`` that starts with it and that (a range)."""

    collection: AsyncCollection[Document]
    field: str = "execution_id"
    prefix_end: str | None = None

    def selecting(self, execution_ids: Sequence[str]) -> Document:
        if self.prefix_end is None:
            return {self.field: {"$in": list(execution_ids)}}
        after = chr(ord(self.prefix_end) + 1)
        ranges = [
            {"_id": {"$gte": eid + self.prefix_end, "$lt": eid + after}} for eid in execution_ids
        ]
        return ranges[0] if len(ranges) == 1 else {"$or": ranges}


class MongoErasure:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        # Working data: what ran and what waited, of no use once an execution has ended.
        self._working = [
            _Records(database["steps"]),
            _Records(database["attempts"]),
            _Records(database["execution_progress"], prefix_end=":"),
            _Records(database["suspended_executions"], prefix_end="|"),
            _Records(database["undelivered_executions"], prefix_end="|"),
        ]
        # The audit: who decided what, how reviewers were told. Spent links are an execution's
        # too (each names it, and who used it): once the execution is gone no link can decide it,
        # so the record that the link was spent has nothing left to guard. The execution's
        # versions, then its head, go last: a retry after a crash in between still finds the
        # execution the caller checked had ended, and erases the rest.
        # A delivery still pending stays pending with the audit (its outbox entry with it: the
        # start-up adoption would queue it again from the history anyway), and goes out as it
        # would have; erased, both go.
        self._audit = [
            _Records(database["notification_outbox"], prefix_end=":"),
            _Records(database["decision_claims"], prefix_end=":"),
            _Records(database["approvals"], prefix_end=":"),
            _Records(database["approval_slots"], prefix_end=":"),
            _Records(database["notification_claims"], prefix_end=":"),
            _Records(database["notification_deliveries"], prefix_end=":"),
            _Records(database["spent_links"]),
            _Records(database["execution_versions"]),
            _Records(database["executions"], field="_id"),
        ]
        self._spent_links = database["spent_links"]

    async def ensure_indexes(self) -> None:
        # The one key erasing needs that no port's reads index: a link is spent and read by its
        # own id. Links are few and rarely written, so the index costs next to nothing.
        await self._spent_links.create_index([("execution_id", ASCENDING)], name="by_execution")

    async def erase(self, execution_ids: Sequence[str], *, keep_audit: bool) -> int:
        ids = list(dict.fromkeys(execution_ids))
        for eid in ids:
            if not eid or any(sep in eid for sep in SEPARATORS):
                raise ValueError(f"an execution id cannot be empty or hold ':' or '|': {eid!r}")
        targets = self._working if keep_audit else self._working + self._audit
        removed = 0
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            for records in targets:
                result = await records.collection.delete_many(records.selecting(batch))
                removed += result.deleted_count
        return removed
