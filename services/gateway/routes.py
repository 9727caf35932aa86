"""The API's routes, one router per resource, each in its module: a route turns a request into
an ``Intake`` call. The errors those raise carry their own problem documents, rendered by the
one handler in services/gateway/problems.py, so no route maps an error."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from services.gateway.auth import ANY_ROLE, access
from services.gateway.bodies import api_router
from services.gateway.conversations import Conversations
from services.gateway.cursors import PageCursors
from services.gateway.executions import cancel_router, executions_router
from services.gateway.intake import Intake
from services.gateway.invoke import invoke_router
from services.gateway.openapi import API, ProjectPath, WorkspaceQuery
from services.gateway.resume import resume_router
from services.gateway.schemas import AgentList, AgentView
from services.gateway.sessions import sessions_router
from shared.agents import AgentRegistry
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.ports import Store


def build_router(
    intake: Intake,
    registry: AgentRegistry,
    keys: ApiKeys,
    cursors: PageCursors,
    conversations: Conversations,
    store: Store,
) -> APIRouter:
    """The API's routes (streams and notifications have routers of their own)."""
    router = APIRouter()
    router.include_router(agents_router(intake, registry, keys))
    router.include_router(invoke_router(intake, keys, conversations, store))
    router.include_router(sessions_router(conversations, store, keys))
    router.include_router(executions_router(intake, keys, cursors))
    router.include_router(resume_router(intake, keys))
    router.include_router(cancel_router(intake, keys))
    return router


def agents_router(intake: Intake, registry: AgentRegistry, keys: ApiKeys) -> APIRouter:
    router = api_router()
    # A dependency as a default: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    reader = Depends(access(keys, "reading", ANY_ROLE))

    @router.get(f"{API}/agents", response_model=AgentList, tags=["agents"])
    async def list_agents(
        project_id: ProjectPath, workspace_id: WorkspaceQuery, key: ApiKey = reader
    ) -> AgentList:
        """The agents this deployment has, each with why the sandboxes cannot load it if so."""
        errors = await intake.agent_load_errors()
        return AgentList(
            items=[
                AgentView(name=a.name, description=a.description, load_error=errors.get(a.name))
                for a in registry.all()
            ]
        )

    return router
