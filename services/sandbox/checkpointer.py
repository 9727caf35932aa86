"""A checkpoint saver that guards the real one: fenced writes and a size budget.

- **Fencing.** Before every checkpoint write, the attempt that is running the graph must still
  be the current one (``current_fence``, bound per run by the sandbox). A replica that was paused
  past its lease and then continues finds a newer attempt and stops: only one lineage of
  checkpoints is written.
- **Size.** A checkpoint larger than the budget fails with ``CheckpointTooLarge`` before the
  write, instead of a driver error (MongoDB's document limit is 16 MiB). It is serialized once
  to be sized, and a saver that takes those bytes is given them
  (services/sandbox/checkpoint_bytes.py).

Everything else is delegated unchanged to the wrapped saver.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from services.sandbox.checkpoint_bytes import CopiesCheckpoints, PutsSerialized, copy_decoded
from shared.errors import InterlockError

Fence = Callable[[], Awaitable[None]]

current_fence: contextvars.ContextVar[Fence | None] = contextvars.ContextVar(
    "interlock_current_fence", default=None
)


class CheckpointTooLarge(InterlockError):
    def __init__(self, thread_id: str, size: int, budget: int) -> None:
        super().__init__(
            f"checkpoint of execution {thread_id} is {size} bytes, over the budget of {budget}"
            " bytes (INTERLOCK_MAX_CHECKPOINT_BYTES); keep large data out of the graph state"
        )


class GuardedSaver(BaseCheckpointSaver[Any]):
    def __init__(self, inner: BaseCheckpointSaver[Any], *, max_checkpoint_bytes: int) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.max_checkpoint_bytes = max_checkpoint_bytes

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    # --- reads: delegated ------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.inner.get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.inner.aget_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.inner.list(config, filter=filter, before=before, limit=limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self.inner.alist(config, filter=filter, before=before, limit=limit):
            yield item

    # --- writes: fenced and sized ----------------------------------------------------------------

    def _check_size(self, config: RunnableConfig, size: int) -> None:
        if size > self.max_checkpoint_bytes:
            thread_id = str(config.get("configurable", {}).get("thread_id", "?"))
            raise CheckpointTooLarge(thread_id, size, self.max_checkpoint_bytes)

    async def _fence(self) -> None:
        fence = current_fence.get()
        if fence is not None:
            await fence()

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # The sandbox runs graphs with ainvoke only; the sync path (agent tooling, tests) is
        # sized but cannot await the fence.
        self._check_size(config, len(self.serde.dumps_typed(checkpoint)[1]))
        return self.inner.put(config, checkpoint, metadata, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        # Serialized once: the bytes sized are the bytes stored, where the saver takes them.
        typed = self.serde.dumps_typed(checkpoint)
        self._check_size(config, len(typed[1]))
        await self._fence()
        if isinstance(self.inner, PutsSerialized):
            return await self.inner.aput_serialized(config, checkpoint["id"], typed, metadata)
        return await self.inner.aput(config, checkpoint, metadata, new_versions)

    async def acopy_checkpoint(
        self, source: RunnableConfig, target: RunnableConfig, metadata: dict[str, Any]
    ) -> bool:
        # Not sized: the copy is a checkpoint stored within the budget, and the run's own
        # checkpoint, which replaces it, is sized when it is put.
        if isinstance(self.inner, CopiesCheckpoints):
            await self._fence()
            return await self.inner.acopy_checkpoint(source, target, metadata)
        return await copy_decoded(self, source, target, metadata)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.inner.put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._fence()
        await self.inner.aput_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.inner.adelete_thread(thread_id)
