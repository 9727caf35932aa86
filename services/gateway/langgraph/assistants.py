"""LangGraph's assistants are Interlock's registered agents: an assistant's id, its graph id
and its name are the agent's name (``agents.toml``), and there is one version of each, the one
the sandboxes run. Searched, counted and read as LangGraph's Agent Server answers, with the
graph drawn and described as the sandboxes published it with the agent's version
(shared/domain/descriptions.py): the gateway never imports agent code.

Any key of the project may read them (they are the deployment's, not a workspace's)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from services.gateway.auth import ANY_ROLE, access
from services.gateway.bodies import api_router, json_object
from services.gateway.langgraph.views import contains
from services.gateway.openapi import json_body
from services.gateway.problems import Problem
from shared.agents import AgentRegistry, AgentSpec
from shared.domain.descriptions import AgentDescription
from shared.events import Identifier
from shared.store.agent_versions import AgentVersions
from shared.store.api_keys import ApiKey, ApiKeys

PREFIX = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
TAGS: list[str | Any] = ["langgraph"]
RawBody = Annotated[Any, Body(include_in_schema=False)]
STARTED = datetime(2026, 1, 1).isoformat()
"""Assistants are the registered agents: no creation time of their own."""
SYSTEM = {"created_by": "system"}
"""The metadata LangGraph's server gives the assistant it makes for each graph it serves."""


class AssistantFilter(BaseModel):
    """What ``assistants.count`` asks (and ``assistants.search``, with its page)."""

    model_config = ConfigDict(extra="forbid")

    graph_id: str | None = None
    name: str | None = Field(default=None, max_length=1000)
    """Part of the name, in any case (as LangGraph's server matches it)."""
    metadata: dict[str, Any] | None = None
    """JSON containment, as LangGraph's ``@>``."""


class AssistantSearch(AssistantFilter):
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: Literal["assistant_id", "graph_id", "name", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc", "ASC", "DESC"] | None = None
    select: list[str] | None = None


def assistant_body(spec: AgentSpec, load_error: str | None = None) -> dict[str, Any]:
    """An agent as LangGraph's Assistant. One the sandboxes cannot load says why in its
    metadata (LangGraph's server would not have started; here the others serve)."""
    return {
        "assistant_id": spec.name,
        "graph_id": spec.name,
        "config": {},
        "context": {},
        "created_at": STARTED,
        "updated_at": STARTED,
        "metadata": {**SYSTEM, **({} if load_error is None else {"load_error": load_error})},
        "version": 1,
        "name": spec.name,
        "description": spec.description or None,
    }


def matching(
    registry: AgentRegistry, asked: AssistantFilter, errors: dict[str, str]
) -> list[dict[str, Any]]:
    """The assistants ``asked`` for, in the registry's order; a graph id that is no agent's is
    a 404, as LangGraph's server answers it."""
    if asked.graph_id is not None:
        assistant_spec(registry, asked.graph_id)
    bodies = [assistant_body(spec, errors.get(spec.name)) for spec in registry.all()]
    part = (asked.name or "").lower()
    return [
        body
        for body in bodies
        if asked.graph_id in (None, body["graph_id"])
        and part in body["name"].lower()
        and contains(body["metadata"], asked.metadata or {})
    ]


def assistant_spec(registry: AgentRegistry, assistant_id: str) -> AgentSpec:
    spec = registry.get(assistant_id)
    if spec is None:
        raise Problem(
            404,
            "assistant-not-found",
            "Assistant not found",
            f"no assistant {assistant_id!r}; registered: {', '.join(registry.names())}",
        )
    return spec


def xray_depth(given: str | None) -> bool | int:
    """``xray`` as LangGraph's server reads it: ``true`` / ``false``, or a depth of 1 or more."""
    if given is None or given in ("false", "False"):
        return False
    if given in ("true", "True"):
        return True
    if given.isdigit() and int(given) >= 1:
        return int(given)
    raise Problem(
        400,
        "invalid-request",
        "Invalid request",
        f"xray: {given!r} is neither true, false nor a depth of 1 or more",
    )


def build_assistants_router(
    registry: AgentRegistry, versions: AgentVersions, keys: ApiKeys
) -> APIRouter:
    router = api_router()
    # A dependency as a default: FastAPI cannot resolve this function's locals from the
    # (postponed) annotations.
    anyone = Depends(access(keys, "reading", ANY_ROLE))

    async def described(assistant_id: str) -> tuple[AgentSpec, AgentDescription]:
        spec = assistant_spec(registry, assistant_id)
        description = await versions.description(spec.name)
        if description is not None:
            return spec, description
        error = (await versions.unloadable()).get(spec.name)
        if error is not None:
            raise Problem(
                422,
                "assistant-not-loadable",
                "Assistant not loadable",
                f"the sandboxes cannot load agent {spec.name!r}, so its graph cannot be"
                f" described: {error}",
            )
        # Not a 503: no dependency failed. It holds until a sandbox of this release starts.
        raise Problem(
            409,
            "assistant-not-described",
            "Assistant not described yet",
            f"no sandbox has described agent {spec.name!r} yet: sandboxes describe each agent"
            " when they start (a sandbox of an earlier release does not)",
        )

    @router.post(
        f"{PREFIX}/assistants/search",
        tags=TAGS,
        openapi_extra=json_body(AssistantSearch, required=False),
    )
    async def search_assistants(
        response: Response,
        project_id: Identifier,
        workspace_id: Identifier,
        raw: RawBody = None,
        key: ApiKey = anyone,
    ) -> list[dict[str, Any]]:
        """The registered agents as assistants, by ``graph_id``, ``name`` (a part of it, in
        any case) and ``metadata``; ``X-Pagination-Total`` and ``X-Pagination-Next`` say what
        is left."""
        asked = json_object(raw, AssistantSearch, required=False)
        found = matching(registry, asked, await versions.unloadable())
        if asked.sort_by is not None:
            descending = (asked.sort_order or "desc").lower() == "desc"
            field = asked.sort_by
            found.sort(key=lambda body: str(body[field]).lower(), reverse=descending)
        page = found[asked.offset : asked.offset + asked.limit]
        response.headers["X-Pagination-Total"] = str(len(found))
        if asked.offset + asked.limit < len(found):
            response.headers["X-Pagination-Next"] = str(asked.offset + asked.limit)
        if asked.select:
            return [{k: v for k, v in body.items() if k in asked.select} for body in page]
        return page

    @router.post(
        f"{PREFIX}/assistants/count",
        tags=TAGS,
        openapi_extra=json_body(AssistantFilter, required=False),
    )
    async def count_assistants(
        project_id: Identifier, workspace_id: Identifier, raw: RawBody = None, key: ApiKey = anyone
    ) -> int:
        """How many assistants ``assistants.search`` would find."""
        asked = json_object(raw, AssistantFilter, required=False)
        return len(matching(registry, asked, await versions.unloadable()))

    @router.get(f"{PREFIX}/assistants/{{assistant_id}}", tags=TAGS)
    async def get_assistant(
        project_id: Identifier, workspace_id: Identifier, assistant_id: str, key: ApiKey = anyone
    ) -> dict[str, Any]:
        spec = assistant_spec(registry, assistant_id)
        return assistant_body(spec, (await versions.unloadable()).get(spec.name))

    @router.get(f"{PREFIX}/assistants/{{assistant_id}}/graph", tags=TAGS)
    async def get_graph(
        project_id: Identifier,
        workspace_id: Identifier,
        assistant_id: str,
        xray: Annotated[str | None, Query(max_length=20)] = None,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """The graph, drawable (``nodes`` and ``edges``); ``xray`` draws its subgraphs' nodes
        too, to a depth or (``true``) all of them."""
        depth = xray_depth(xray)
        spec, description = await described(assistant_id)
        drawn = description.graph(depth)
        if drawn is None:
            raise Problem(
                422,
                "graph-not-drawable",
                "Graph cannot be drawn",
                f"LangGraph cannot draw the graph of agent {spec.name!r}",
            )
        return drawn

    @router.get(f"{PREFIX}/assistants/{{assistant_id}}/schemas", tags=TAGS)
    async def get_schemas(
        project_id: Identifier, workspace_id: Identifier, assistant_id: str, key: ApiKey = anyone
    ) -> dict[str, Any]:
        """The graph's input, output, state, config and context JSON schemas (null where
        LangGraph makes none)."""
        spec, description = await described(assistant_id)
        return description.schemas_of(spec.name)

    @router.get(f"{PREFIX}/assistants/{{assistant_id}}/subgraphs", tags=TAGS)
    async def get_subgraphs(
        project_id: Identifier,
        workspace_id: Identifier,
        assistant_id: str,
        recurse: bool = False,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """The schemas of the graph's subgraphs, by namespace (their own subgraphs too with
        ``recurse``)."""
        _, description = await described(assistant_id)
        return description.subgraphs_of(None, recurse=recurse)

    @router.get(f"{PREFIX}/assistants/{{assistant_id}}/subgraphs/{{namespace}}", tags=TAGS)
    async def get_subgraph(
        project_id: Identifier,
        workspace_id: Identifier,
        assistant_id: str,
        namespace: Annotated[str, Path(max_length=1000)],
        recurse: bool = False,
        key: ApiKey = anyone,
    ) -> dict[str, Any]:
        """The subgraph at ``namespace`` (``parent|child`` needs ``recurse``), or nothing."""
        _, description = await described(assistant_id)
        return description.subgraphs_of(namespace, recurse=recurse)

    return router
