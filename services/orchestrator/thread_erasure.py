"""Erasing a deleted thread's turns (docs/langgraph-api.md, "Deleting a thread").

The gateway makes the thread a tombstone, checks that its turns ended and publishes
``thread.delete_requested``; here every ended turn it lists, and any later one (a run started
while the gateway was deleting), is erased: its LangGraph checkpoints, then its records in the
store, by the deployment's policy (``keep_audit``: the execution, its versions, claims,
approvals and delivery history stay, readable through the executions API). A turn that has not
ended is left alone and logged: nothing may be pulled from under a run or a review, and the
tombstone already keeps the thread from starting another.

Only a gateway's signed request erases anything: erasing is irreversible, and the gateway is the
one that checked the caller's key and role.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from langgraph.checkpoint.base import BaseCheckpointSaver

from shared.domain.execution import Execution
from shared.domain.threads import MAX_TURN_PROBES, turn_execution_id
from shared.errors import RejectedMessage
from shared.events import ThreadDeleteRequested
from shared.senders import GatewaySender, Sender
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)

READS_AT_ONCE = 64
"""A thread's turns are read this many at once: a long thread in a few round trips, and no
burst of thousands of commands at the store."""

CheckpointEraser = Callable[[Sequence[str]], Awaitable[object]]
"""Removes every checkpoint of these checkpoint threads (one per execution)."""


def saver_eraser(saver: BaseCheckpointSaver[Any]) -> CheckpointEraser:
    """A saver's own ``adelete_thread``, thread by thread: for the embedded mode's SQLite saver,
    which has no batch delete (on MongoDB, shared/store/mongo/checkpoint_erasure.py sends one
    command per collection instead)."""

    async def erase(thread_ids: Sequence[str]) -> None:
        for thread_id in thread_ids:
            await saver.adelete_thread(thread_id)

    return erase


@dataclass(frozen=True)
class Erased:
    ended: list[str]
    """The turns erased (or gone already)."""
    running: list[str]
    """The turns left, not ended."""


class ThreadEraser:
    def __init__(self, *, store: Store, checkpoints: CheckpointEraser, keep_audit: bool) -> None:
        self._store = store
        self._checkpoints = checkpoints
        self._keep_audit = keep_audit

    async def on_delete_requested(self, event: ThreadDeleteRequested, sender: Sender) -> None:
        if not isinstance(sender, GatewaySender):
            log.warning("thread.erase_refused", thread_id=event.thread_id, sender=repr(sender))
            raise RejectedMessage(
                "not applied: a thread is erased only on a gateway's signed request, and this"
                f" one is {sender!r}"
            )
        scope = (event.project_id, event.workspace_id, event.thread_id)
        erased = await self.erase(*scope, event.execution_ids)
        if not erased.running:
            await self._store.threads.erasure_done(*scope)

    async def erase_deleted(self, record: ThreadRecord) -> int:
        """Erase a tombstone's turns and, once none is left unended, say its erasure is done
        (shared/store/threads.py: a tombstone's ``expires_at`` is its erasure due; the
        retention sweep erases every one still due, so a process that died between a
        thread's tombstone and its erasure leaves nothing behind)."""
        scope = (record.project_id, record.workspace_id, record.thread_id)
        listed = [turn_execution_id(*scope, n) for n in range(1, record.turns + 1)]
        erased = await self.erase(*scope, listed)
        if not erased.running:
            await self._store.threads.erasure_done(*scope)
        return len(erased.ended)

    async def unended(
        self, project_id: str, workspace_id: str, thread_id: str, listed: Sequence[str]
    ) -> list[str]:
        """The ids of the thread's turns (those listed and any after them) not ended."""
        _, running = await self._turns(project_id, workspace_id, thread_id, listed)
        return running

    async def erase(
        self, project_id: str, workspace_id: str, thread_id: str, listed: Sequence[str]
    ) -> Erased:
        """Erase the thread's ended turns, those ``listed`` and any after them."""
        ended, running = await self._turns(project_id, workspace_id, thread_id, listed)
        if running:
            log.warning("thread.erase_skipped_unended", thread_id=thread_id, execution_ids=running)
        await self._checkpoints(ended)
        removed = await self._store.erasure.erase(ended, keep_audit=self._keep_audit)
        log.info(
            "thread.erased",
            thread_id=thread_id,
            turns=len(ended),
            records=removed,
            kept_audit=self._keep_audit,
        )
        return Erased(ended, running)

    async def _turns(
        self, project_id: str, workspace_id: str, thread_id: str, listed: Sequence[str]
    ) -> tuple[list[str], list[str]]:
        """The listed turns and those after them that ended (or are gone: erased by an earlier
        delivery of this request), and the ids of those that have not ended."""
        listed = list(dict.fromkeys(listed))
        ended: list[str] = []
        running: list[str] = []
        found: list[Execution | None] = []
        for start in range(0, len(listed), READS_AT_ONCE):
            batch = listed[start : start + READS_AT_ONCE]
            found += await asyncio.gather(
                *(self._store.executions.get(project_id, e) for e in batch)
            )
        for execution_id, execution in zip(listed, found, strict=True):
            if execution is None:
                ended.append(execution_id)  # erased by an earlier delivery: erasing is a no-op
            elif execution.workspace_id != workspace_id:
                # Turn ids derive from the workspace, so the gateway never lists another's.
                log.warning("thread.erase_foreign_turn", execution_id=execution_id)
            elif execution.status.is_terminal:
                ended.append(execution_id)
            else:
                running.append(execution_id)
        # Turns are numbered from 1 and the gateway lists them all: read on past the last.
        for number in range(len(listed) + 1, len(listed) + 1 + MAX_TURN_PROBES):
            execution_id = turn_execution_id(project_id, workspace_id, thread_id, number)
            execution = await self._store.executions.get(project_id, execution_id)
            if execution is None:
                break
            (ended if execution.status.is_terminal else running).append(execution_id)
        return ended, running
