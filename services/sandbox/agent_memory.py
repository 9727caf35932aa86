"""The ``BaseStore`` every graph runs with: LangGraph's cross-thread memory, on the workspace's
items (shared/store/memories.py).

One instance serves every graph of the process; the tenant is the run's. The runner binds the
execution's project and workspace around each run (``bound_tenant``), and LangGraph copies the
context into the tasks and worker threads that run nodes, so a node's ``store.put`` (or
``runtime.store``, ``get_store()``) reaches its own workspace's items and no other's. A store
used where no run is bound raises: there is no workspace to read.

Writes follow the replay guarantee: inside a run each put and delete is a durable step
(``store.put`` / ``store.delete``, keyed like any step by where the node calls it), so a node
that wrote and then waited on ``interrupt()`` does not write again when it runs again on
resume, nor after a crash of the attempt, even if another thread changed the item meanwhile.
Reads are live: a node run again reads what is stored now. Semantic search (``query``, an
``index``) needs an embeddings index, which Interlock does not configure: as LangGraph's stores
without one, a query is ignored (items come in their order, ``score`` None) and ``index`` has
no effect.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from interlock.sdk import run_step, run_step_sync
from shared.store.memories import (
    MemoryItem,
    MemoryStore,
    Tenant,
    check_filter,
    check_key,
    check_namespace,
    get_item,
    namespaces_of,
    new_item,
    search_items,
)


@dataclass(frozen=True)
class _Bound:
    tenant: Tenant
    loop: asyncio.AbstractEventLoop


CURRENT_TENANT: contextvars.ContextVar[_Bound | None] = contextvars.ContextVar(
    "interlock_memory_tenant", default=None
)


class NoTenant(RuntimeError):
    """The store was used outside a run: no workspace to read or write."""


@contextmanager
def bound_tenant(project_id: str, workspace_id: str) -> Iterator[None]:
    """Bind the workspace whose items the graphs run now read and write (on the running loop)."""
    token = CURRENT_TENANT.set(_Bound(Tenant(project_id, workspace_id), asyncio.get_running_loop()))
    try:
        yield
    finally:
        CURRENT_TENANT.reset(token)


def _bound() -> _Bound:
    bound = CURRENT_TENANT.get()
    if bound is None:
        raise NoTenant("the store is the workspace's memory and is used inside a run of the agent")
    return bound


def _item(found: MemoryItem) -> Item:
    return Item(
        value=found.value,
        key=found.key,
        namespace=found.namespace,
        created_at=found.created_at,
        updated_at=found.updated_at,
    )


def _found(found: MemoryItem) -> SearchItem:
    return SearchItem(
        namespace=found.namespace,
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
        score=None,
    )


class AgentMemory(BaseStore):
    supports_ttl = True

    def __init__(self, memories: MemoryStore) -> None:
        self._memories = memories

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        tenant = _bound().tenant
        results: list[Result] = []
        for op in ops:
            if isinstance(op, PutOp):
                await run_step(self._step_name(op), self._write, tenant, op)
                results.append(None)
            else:
                results.append(await self._read(tenant, op))
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """From a sync node's worker thread: the work runs on the run's loop (the store is async
        there); a write's step is taken here, where the node's context is."""
        bound = _bound()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is bound.loop:
            raise RuntimeError(
                "the store's sync methods were called on the event loop's thread (from an async"
                " node): use the async ones (await store.aput(...), store.aget(...))"
            )

        def on_loop(work: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(work, bound.loop).result()

        results: list[Result] = []
        for op in ops:
            if isinstance(op, PutOp):
                run_step_sync(
                    self._step_name(op), lambda op=op: on_loop(self._write(bound.tenant, op))
                )
                results.append(None)
            else:
                results.append(on_loop(self._read(bound.tenant, op)))
        return results

    @staticmethod
    def _step_name(op: PutOp) -> str:
        return "store.delete" if op.value is None else "store.put"

    async def _write(self, tenant: Tenant, op: PutOp) -> None:
        namespace, key = check_namespace(op.namespace), check_key(op.key)
        if op.value is None:
            await self._memories.delete(tenant, namespace, key)
            return
        ttl = None if isinstance(op.ttl, NotProvided) else op.ttl
        item = new_item(tenant, namespace, key, op.value, ttl_minutes=ttl, now=datetime.now(UTC))
        await self._memories.put(item)

    async def _read(self, tenant: Tenant, op: Op) -> Result:
        now = datetime.now(UTC)
        if isinstance(op, GetOp):
            found = await get_item(
                self._memories,
                tenant,
                check_namespace(op.namespace),
                check_key(op.key),
                now=now,
                refresh=op.refresh_ttl,
            )
            return None if found is None else _item(found)
        if isinstance(op, SearchOp):
            items = await search_items(
                self._memories,
                tenant,
                check_namespace(op.namespace_prefix, prefix=True),
                now=now,
                filter=check_filter(op.filter),
                limit=op.limit,
                offset=op.offset,
                refresh=op.refresh_ttl,
            )
            return [_found(item) for item in items]
        if isinstance(op, ListNamespacesOp):
            conditions = {c.match_type: tuple(c.path) for c in op.match_conditions or ()}
            return await namespaces_of(
                self._memories,
                tenant,
                now=now,
                prefix=conditions.get("prefix", ()),
                suffix=conditions.get("suffix", ()),
                max_depth=op.max_depth,
                limit=op.limit,
                offset=op.offset,
            )
        raise ValueError(f"unknown store operation {type(op).__name__}")
