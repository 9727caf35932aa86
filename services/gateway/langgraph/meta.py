"""``GET {prefix}/info`` and ``GET {prefix}/ok``, answered as LangGraph's Agent Server answers
them: the UIs call ``/info`` when they load (Agent Chat UI says "Failed to connect to LangGraph
server" unless it answers 200; Agent Inbox reads ``host.project_id`` to name its inbox), and
monitors call ``/ok``.

Neither needs a key, as on LangGraph's server: Agent Inbox calls ``/info`` with none. What they
answer is the same for every project and workspace in the path, known or not, and for any key
or none (a key sent along is not even read): they say which server this is, never anything of a
tenant."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import APIRouter, Query

from services.gateway.bodies import api_router
from shared.events import Identifier
from shared.store.ports import Store

PREFIX = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
TAGS: list[str | Any] = ["langgraph"]


def _version_of(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def server_info() -> dict[str, Any]:
    """What ``/info`` answers, in the shape of LangGraph's: the flags say what this server
    serves (assistants, crons, no LangSmith), and ``host`` names no project (Agent Inbox then
    names its inbox by a UUID of its own, as with LangGraph's local server)."""
    return {
        "version": _version_of("interlock"),
        "langgraph_py_version": _version_of("langgraph"),
        "flags": {
            "assistants": True,
            "crons": True,
            "langsmith": False,
            "langsmith_tracing_replicas": False,
            "langsmith_tracing_session_on_runs": False,
        },
        "host": {
            "kind": "interlock",
            "project_id": None,
            "host_revision_id": None,
            "revision_id": None,
            "tenant_id": None,
        },
    }


def build_meta_router(store: Store) -> APIRouter:
    router = api_router()
    info = server_info()

    @router.get(f"{PREFIX}/info", tags=TAGS)
    async def get_info(project_id: Identifier, workspace_id: Identifier) -> dict[str, Any]:
        """Which server this is (LangGraph's ``/info``); no key needed."""
        return info

    @router.get(f"{PREFIX}/ok", tags=TAGS)
    async def get_ok(
        project_id: Identifier,
        workspace_id: Identifier,
        check_db: Annotated[int, Query(ge=0, le=1)] = 0,
    ) -> dict[str, Any]:
        """The server answers (LangGraph's ``/ok``); with ``check_db=1`` its store answers too
        (503 ``service-unavailable`` when it does not). No key needed."""
        if not check_db:
            return {"ok": True, "services": {}}
        await store.ping()
        return {"ok": True, "services": {"database": "healthy"}}

    return router
