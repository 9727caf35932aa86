"""A turn of a thread starts where the thread stands: the checkpoint of its base (the turn
before, or a checkpoint a run forks from) is copied into the turn's own checkpoint thread before
the turn's input runs, so the graph applies the input to the conversation so far, as LangGraph
applies a second input on a thread (shared/domain/threads.py).

The copy is a put within the run's checkpoint scope (services/sandbox/checkpoint_run.py): held
until the run ends and stored with the run's own checkpoint, one write. A run that dies before
that stored nothing, and its next attempt copies again.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from services.sandbox.checkpoint_bytes import CopiesCheckpoints, copy_decoded
from shared.events import ThreadTurn

BASE_COPY_KEY = "interlock_base"
"""The metadata key of a turn's copy of its base checkpoint (its value: the base's execution):
the saver does not store the copy once the run's own checkpoint replaces it."""


class CheckpointNotFound(Exception):
    """The checkpoint a fork names does not exist (or is not the base's)."""


async def copy_base(saver: object, turn: ThreadTurn, config: RunnableConfig) -> bool:
    """Copy ``turn``'s base checkpoint into the thread of ``config``; False when the base has
    none (it ended before its first checkpoint: the turn starts from the empty state, as a
    thread with no checkpoint does). Raises ``CheckpointNotFound`` for a fork's checkpoint that
    is not there."""
    if turn.base is None:
        return False
    if not isinstance(saver, BaseCheckpointSaver):
        # Graphs are compiled with the sandbox's saver (services/sandbox/loading.py).
        raise TypeError(f"the graph has no checkpoint saver to start a turn from: {saver!r}")
    wanted: dict[str, Any] = {"thread_id": turn.base, "checkpoint_ns": ""}
    if turn.base_checkpoint_id is not None:
        wanted["checkpoint_id"] = turn.base_checkpoint_id
    source: RunnableConfig = {"configurable": wanted}
    target: RunnableConfig = {
        "configurable": {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}
    }
    metadata = {"source": "fork", BASE_COPY_KEY: turn.base}
    if isinstance(saver, CopiesCheckpoints):  # the sandbox's: the stored bytes, never decoded
        copied = await saver.acopy_checkpoint(source, target, metadata)
    else:
        copied = await copy_decoded(saver, source, target, metadata)
    if not copied and turn.base_checkpoint_id is not None:
        raise CheckpointNotFound(
            f"checkpoint {turn.base_checkpoint_id} of the thread {turn.thread_id} is not"
            " stored (deleted by its retention, or never written)"
        )
    return copied


def is_base_copy(snapshot: StateSnapshot) -> bool:
    """Is the thread's newest checkpoint the copy a turn started from, its input not yet run?"""
    return snapshot.created_at is not None and BASE_COPY_KEY in (snapshot.metadata or {})
