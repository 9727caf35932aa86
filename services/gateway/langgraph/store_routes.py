"""LangGraph's store API (``client.store.*``), on the workspace's memory: the items the graphs
of the workspace read and write (shared/store/memories.py, services/sandbox/agent_memory.py).

The routes and bodies are the Agent Server's: ``PUT /store/items`` (204), ``GET /store/items``
(the item, or ``null``), ``DELETE /store/items`` (204), ``POST /store/items/search``
(``{"items": [...]}``) and ``POST /store/namespaces`` (``{"namespaces": [...]}``). Every item is
the path's workspace's: another workspace's items are never read, listed or written. Reading
needs any role of the workspace; writing and deleting a member's or an owner's (what starting a
run needs). What LangGraph's rules refuse is a 400 ``invalid-request`` naming the rule, a value
over the limit a 413; semantic search (``query``) has no index here and is ignored, as
LangGraph's stores without an index ignore it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from services.gateway.auth import ANY_ROLE, WRITERS, access, require_role
from services.gateway.bodies import api_router, json_object
from services.gateway.langgraph.routes import PREFIX, TAGS
from services.gateway.openapi import json_body
from services.gateway.problems import Problem
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.memories import (
    InvalidMemory,
    MemoryItem,
    MemoryStore,
    MemoryValueTooLarge,
    Namespace,
    Tenant,
    check_filter,
    check_key,
    check_namespace,
    get_item,
    namespaces_of,
    new_item,
    search_items,
)

RawBody = Annotated[Any, Body(include_in_schema=False)]


class ItemPut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: list[str]
    key: str
    value: dict[str, Any]
    index: Literal[False] | list[str] | None = None
    ttl: float | None = None
    """Minutes; None: kept until deleted."""


class ItemDelete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: list[str]
    key: str


class ItemSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace_prefix: list[str] = Field(default_factory=list)
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=10_000)
    query: str | None = None
    refresh_ttl: bool | None = None


class NamespaceList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefix: list[str] | None = None
    suffix: list[str] | None = None
    max_depth: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=10_000)


def refused(exc: InvalidMemory) -> Problem:
    if isinstance(exc, MemoryValueTooLarge):
        return Problem(413, "value-too-large", "Value too large", str(exc))
    return Problem(400, "invalid-request", "Invalid request", str(exc))


def checked_namespace(labels: list[str], *, prefix: bool = False) -> Namespace:
    try:
        return check_namespace(labels, prefix=prefix)
    except InvalidMemory as exc:
        raise refused(exc) from exc


def search_body(item: MemoryItem) -> dict[str, Any]:
    return {**item.body(), "score": None}


def build_store_router(memories: MemoryStore, keys: ApiKeys) -> APIRouter:
    router = api_router()
    anyone = Depends(access(keys, "reading", ANY_ROLE))

    @router.put(
        f"{PREFIX}/store/items",
        tags=TAGS,
        status_code=204,
        openapi_extra=json_body(ItemPut, required=True),
    )
    async def put_item(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> Response:
        """Create or replace an item (``store.put_item``); its ``created_at`` is kept."""
        require_role(key, "writing the store", WRITERS)
        asked = json_object(raw, ItemPut, required=True)
        tenant = Tenant(project_id, workspace_id)
        try:
            item = new_item(
                tenant,
                asked.namespace,
                asked.key,
                asked.value,
                ttl_minutes=asked.ttl,
                now=datetime.now(UTC),
            )
        except InvalidMemory as exc:
            raise refused(exc) from exc
        await memories.put(item)
        return Response(status_code=204)

    @router.get(f"{PREFIX}/store/items", tags=TAGS)
    async def read_item(
        project_id: Identifier,
        workspace_id: Identifier,
        item_key: Annotated[str, Query(alias="key", min_length=1, max_length=1024)],
        namespace: Annotated[str, Query(max_length=6000)] = "",
        refresh_ttl: Annotated[bool | None, Query()] = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any] | None:
        """The item (``store.get_item``), or ``null``; ``namespace`` is its labels joined by
        ``.``, as the clients send it."""
        labels = checked_namespace(namespace.split(".") if namespace else [])
        found = await get_item(
            memories,
            Tenant(project_id, workspace_id),
            labels,
            check_key(item_key),
            now=datetime.now(UTC),
            refresh=refresh_ttl is not False,
        )
        return None if found is None else found.body()

    @router.delete(
        f"{PREFIX}/store/items",
        tags=TAGS,
        status_code=204,
        openapi_extra=json_body(ItemDelete, required=True),
    )
    async def delete_item(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> Response:
        """Delete an item (``store.delete_item``); deleting one that is not there is no error."""
        require_role(key, "writing the store", WRITERS)
        asked = json_object(raw, ItemDelete, required=True)
        labels = checked_namespace(asked.namespace)
        try:
            item_key = check_key(asked.key)
        except InvalidMemory as exc:
            raise refused(exc) from exc
        await memories.delete(Tenant(project_id, workspace_id), labels, item_key)
        return Response(status_code=204)

    @router.post(
        f"{PREFIX}/store/items/search",
        tags=TAGS,
        openapi_extra=json_body(ItemSearch, required=False),
    )
    async def search(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> dict[str, Any]:
        """The items under ``namespace_prefix``, latest update first, matching ``filter``
        (``store.search_items``)."""
        asked = json_object(raw, ItemSearch, required=False)
        prefix = checked_namespace(asked.namespace_prefix, prefix=True)
        try:
            condition = check_filter(asked.filter)
        except InvalidMemory as exc:
            raise refused(exc) from exc
        items = await search_items(
            memories,
            Tenant(project_id, workspace_id),
            prefix,
            now=datetime.now(UTC),
            filter=condition,
            limit=asked.limit,
            offset=asked.offset,
            refresh=asked.refresh_ttl is not False,
        )
        return {"items": [search_body(item) for item in items]}

    @router.post(
        f"{PREFIX}/store/namespaces",
        tags=TAGS,
        openapi_extra=json_body(NamespaceList, required=False),
    )
    async def list_namespaces(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> dict[str, Any]:
        """The namespaces that hold items, sorted (``store.list_namespaces``)."""
        asked = json_object(raw, NamespaceList, required=False)
        found = await namespaces_of(
            memories,
            Tenant(project_id, workspace_id),
            now=datetime.now(UTC),
            prefix=checked_namespace(asked.prefix or [], prefix=True),
            suffix=checked_namespace(asked.suffix or [], prefix=True),
            max_depth=asked.max_depth,
            limit=asked.limit,
            offset=asked.offset,
        )
        return {"namespaces": [list(namespace) for namespace in found]}

    return router
