"""Threads deleted when their time to live runs out (LangGraph's thread ``ttl``; docs/
langgraph-api.md, "Thread retention").

A thread with a ttl carries ``expires_at``, which its every new turn moves to now + ttl. Every
orchestrator replica sweeps the threads past it, soonest first, and deletes each as the API's
``threads.delete`` does: a tombstone first, so it is gone for every reader and starts nothing
more, then its turns erased (services/orchestrator/thread_erasure.py). A tombstone's own expiry
is its erasure due, cleared once done: the sweep also erases every deleted thread whose erasure
never finished (a process died between the two steps, a turn had not ended, an erasure request
never reached the bus), so nothing of a deleted thread stays behind. A thread whose turn has
not ended (running, queued, waiting for a review) is not pulled from under it: its expiry moves
one ``retry_after`` on (never earlier than a new turn set it), and a later sweep deletes it once
its turns ended. Replicas sweeping the
same thread at once both erase it, harmlessly (erasing is idempotent).

The same sweep deletes the agents' memory items past their ttl (shared/store/memories.py; they
are never read once expired, so deleting them only frees their room): up to ``MEMORY_BATCH`` a
sweep, by ``_id``, which replicas sweeping at once may both delete, harmlessly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from services.orchestrator.thread_erasure import ThreadEraser
from shared.background import every
from shared.domain.threads import turn_execution_id
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)

BATCH = 100
MEMORY_BATCH = 1000


class ThreadRetention:
    def __init__(
        self,
        *,
        store: Store,
        eraser: ThreadEraser,
        clock: Callable[[], datetime],
        retry_after: timedelta,
    ) -> None:
        self._store = store
        self._eraser = eraser
        self._clock = clock
        self._retry_after = retry_after

    async def run_forever(self, poll_seconds: float) -> None:
        await every(poll_seconds, self.sweep, failed="threads.retention_sweep_failed")

    async def sweep(self) -> int:
        """Delete every thread past its expiry that can be, and erase every deleted one whose
        erasure is still due; how many threads this replica deleted or erased."""
        now = self._clock()
        done = 0
        for record in await self._store.threads.expired(now, limit=BATCH):
            if record.deleted:
                # Its erasure never finished (a process died, or a turn had not ended): again.
                done += int(await self._eraser.erase_deleted(record) > 0)
            else:
                done += await self._expire(record, now)
        forgotten = await self._store.memories.expire(now, limit=MEMORY_BATCH)
        if forgotten:
            log.info("memories.expired", count=forgotten)
        return done

    async def _expire(self, record: ThreadRecord, now: datetime) -> int:
        scope = (record.project_id, record.workspace_id, record.thread_id)
        listed = [turn_execution_id(*scope, n) for n in range(1, record.turns + 1)]
        busy = await self._eraser.unended(*scope, listed)
        if busy:
            # Noted as a turn note is, whose expiry only ever moves later: a turn started since
            # the read above restarted the clock, and this must not shorten it.
            later = now + self._retry_after
            await self._store.threads.note_turn(*scope, record.turns, expires_at=later)
            log.info("thread.expiry_postponed", thread_id=record.thread_id, busy=busy)
            return 0
        # The tombstone's erasure is due from now: were this process to die before it is done,
        # the next sweep would find the tombstone and erase it.
        tombstone = await self._store.threads.mark_deleted(*scope, now)
        if tombstone is None:
            return 0  # deleted meanwhile, by another replica or the API
        await self._eraser.erase_deleted(tombstone)
        log.info("thread.expired", thread_id=record.thread_id, turns=len(listed))
        return 1
