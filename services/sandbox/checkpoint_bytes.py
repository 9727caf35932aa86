"""Checkpoints moved as the bytes they are stored as, where a saver can.

A turn's checkpoint is the whole conversation, so every encode or decode of it grows with the
turns (msgpack, and a LangChain message object built per message). Two paths need none:

- a put the guard has already serialized to size it (services/sandbox/checkpointer.py) hands
  the saver those bytes (``PutsSerialized``) instead of the object to encode again;
- a turn's copy of its base (services/sandbox/thread_base.py) is the base's stored checkpoint
  under another thread: a saver that ``CopiesCheckpoints`` copies the bytes, and only the graph
  decodes them, once, when it reads its thread.

Savers without them (LangGraph's in-memory one, in unit tests) take the decoded path, with the
same result.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata


@runtime_checkable
class PutsSerialized(Protocol):
    async def aput_serialized(
        self,
        config: RunnableConfig,
        checkpoint_id: str,
        typed: tuple[str, bytes],
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        """``aput`` of a checkpoint given as its serde's ``dumps_typed`` of it."""


@runtime_checkable
class CopiesCheckpoints(Protocol):
    async def acopy_checkpoint(
        self, source: RunnableConfig, target: RunnableConfig, metadata: dict[str, Any]
    ) -> bool:
        """Put the checkpoint ``source`` names (its thread's newest when it names no id) as the
        newest of ``target``'s thread, with its metadata updated by ``metadata``; False when
        there is no such checkpoint."""


async def copy_decoded(
    saver: BaseCheckpointSaver[Any],
    source: RunnableConfig,
    target: RunnableConfig,
    metadata: dict[str, Any],
) -> bool:
    """``acopy_checkpoint`` through any saver: read, then put the object read."""
    found = await saver.aget_tuple(source)
    if found is None:
        return False
    checkpoint = found.checkpoint
    updated: Any = {**found.metadata, **metadata}
    await saver.aput(target, checkpoint, updated, dict(checkpoint["channel_versions"]))
    return True
