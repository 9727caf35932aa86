"""Erasing what a deleted thread's executions left in the store (docs/langgraph-api.md,
"Deleting a thread").

A thread's turns are executions (shared/domain/threads.py), so deleting a thread is erasing
those executions: their working data always (durable steps, attempts, progress, the waiting
markers), their audit (the execution and its versions, decision claims, approvals and their
slots, the notification history, with any delivery still pending, which then goes out as it
would have) unless the deployment keeps it. Only executions that ended are
erased (the caller checks): nothing runs, waits or writes for them any more, so a removal races
no writer. Erasing is idempotent, so a redelivered request erases nothing twice and fails
nothing: every adapter removes by key, and removing what is gone is a no-op.

LangGraph checkpoints are not this port's: they belong to the checkpoint saver, whose own
``adelete_thread`` removes them (the orchestrator calls both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class ExecutionErasure(Protocol):
    async def erase(self, execution_ids: Sequence[str], *, keep_audit: bool) -> int:
        """Remove every stored record of these executions (with ``keep_audit``, all but their
        audit: the execution and its versions, decision claims, approvals and slots, and the
        notification history stay); return how many records were removed. Records of other
        executions are left alone, even those whose ids share a prefix."""
        ...
