"""MongoDB adapter of shared/store/approvals.py: every read by ``_id``.

FerretDB 1.x answers any filter but ``{_id: value}`` by scanning the collection, and ``approvals``
grows with every approval ever given, so a generation's approvals are not found by a query:

- ``approvals``: one document per (execution, generation, identity), ``_id`` = ``approval_id``
  (the layout before this one, unchanged). Inserting it is the atomic "one identity counts
  once": of several approvals by one identity, whatever their channel, the first insert wins.
- ``approval_slots``: ``_id`` = ``<execution>:<generation>:<n>``, n = 0, 1, 2...: each counted
  approval copied into the first free slot (insert-only: a taken slot is a duplicate key, and the
  next one is tried). Listing reads slot 0, 1, 2... by ``_id`` until one is missing: n + 1 point
  reads for n approvals.

The approval is inserted first, its slot second, and a slot always carries the approval the
insert stored (the first one), so every copy of an identity's approval is the same and a list
keeps one per approval id. A crash between the two inserts leaves an approval without a slot:
not listed, so it does not count; the request that gave it failed, and when that identity
approves again (the retry), the insert finds the approval and gives it its slot then. Two
concurrent approvals of one identity may both give it a slot: the list keeps one.

Approvals stored before the slots existed have no ``schema_version``; ``ensure_indexes`` gives
each a slot and the version (one query at every start-up, never per request), so an execution
suspended before the upgrade keeps the approvals it had. Run at every start rather than once,
it also adopts what a gateway of the previous version stored during a rolling upgrade.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.store.approvals import Approval, approval_id

SCHEMA_VERSION = 2
"""2: the approval has (or its writer is giving it) a slot. Absent: stored before slots."""

Document = dict[str, Any]


def slot_id(execution_id: str, generation: int, n: int) -> str:
    return f"{execution_id}:{generation}:{n}"


def _approval(document: Document) -> Approval:
    return Approval.model_validate(document["approval"])


def _from_marker(document: Document) -> Approval:
    return Approval.model_validate(
        {k: v for k, v in document.items() if k not in {"_id", "schema_version"}}
    )


class MongoApprovals:
    def __init__(self, database: AsyncDatabase[Document]) -> None:
        self._approvals = database["approvals"]
        self._slots = database["approval_slots"]

    async def ensure_indexes(self) -> None:
        """Nothing to index (every read is by ``_id``); give approvals stored before the slots
        existed their slot."""
        await self.adopt_unslotted()

    async def adopt_unslotted(self) -> int:
        """Slot every approval stored without one by a version before the slots; return how many
        were adopted. One query, for start-up, never per request: FerretDB scans, but pushes
        ``$ne`` down to PostgreSQL (about 20 ms at 20,000 approvals, where ``$exists`` takes 30
        times longer), and once they are adopted nothing matches. Adopting costs a few commands
        per approval (a read per generation, an insert and an update per approval): paid once,
        at the first start after the upgrade."""
        found = self._approvals.find({"schema_version": {"$ne": SCHEMA_VERSION}})
        # Read to the end before writing: the writes take documents out of the query's answer.
        generations: dict[tuple[str, int], list[tuple[str, Approval]]] = {}
        async for document in found:
            approval = _from_marker(document)
            generations.setdefault((approval.execution_id, approval.generation), []).append(
                (document["_id"], approval)
            )
        for (execution_id, generation), approvals in generations.items():
            held = [key async for key, _ in self._read_slots(execution_id, generation)]
            for key, approval in approvals:
                if key not in held:
                    await self._append(key, approval, len(held))
                    held.append(key)
                # Every writer sets the same value on a document nothing else changes: a lost
                # update of FerretDB's non-atomic $set loses nothing.
                await self._approvals.update_one(
                    {"_id": key}, {"$set": {"schema_version": SCHEMA_VERSION}}
                )
        return sum(len(a) for a in generations.values())

    async def record(self, approval: Approval) -> Approval:
        key = approval_id(approval)
        document = {
            "_id": key,
            "schema_version": SCHEMA_VERSION,
            **approval.model_dump(mode="json"),
        }
        try:
            await self._approvals.insert_one(document)
        except DuplicateKeyError:
            stored = await self._approvals.find_one({"_id": key})
            if stored is None:  # approvals are never deleted: a bug, not a race
                raise
            first = _from_marker(stored)
            # Slotted already, unless its writer died between the two inserts: repair that.
            await self._ensure_slot(key, first)
            return first
        await self._append(key, approval, 0)
        return approval

    async def list(self, execution_id: str, generation: int) -> list[Approval]:
        found: dict[str, Approval] = {}
        async for key, approval in self._read_slots(execution_id, generation):
            found.setdefault(key, approval)
        return sorted(found.values(), key=lambda a: a.at)

    async def _read_slots(
        self, execution_id: str, generation: int
    ) -> AsyncIterator[tuple[str, Approval]]:
        """(approval id, approval) of slot 0, 1, 2... until the first free one."""
        n = 0
        while slot := await self._slots.find_one({"_id": slot_id(execution_id, generation, n)}):
            yield slot["approval_id"], _approval(slot)
            n += 1

    async def _ensure_slot(self, key: str, approval: Approval) -> None:
        n = 0
        async for held, _ in self._read_slots(approval.execution_id, approval.generation):
            if held == key:
                return
            n += 1
        await self._append(key, approval, n)

    async def _append(self, key: str, approval: Approval, n: int) -> None:
        """Copy the approval into the first free slot from ``n`` on."""
        while True:
            try:
                await self._slots.insert_one(
                    {
                        "_id": slot_id(approval.execution_id, approval.generation, n),
                        "schema_version": SCHEMA_VERSION,
                        "approval_id": key,
                        "approval": approval.model_dump(mode="json"),
                    }
                )
                return
            except DuplicateKeyError:
                n += 1
