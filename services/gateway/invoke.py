"""``POST .../workspaces/{workspace_id}/invoke``: start an execution."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response, status

from services.gateway.auth import WRITERS, access
from services.gateway.bodies import api_router, idempotency_key_of
from services.gateway.conversations import Conversations
from services.gateway.intake import Intake
from services.gateway.openapi import (
    API,
    BODY_RESPONSES,
    INVOKE_REFUSALS,
    ProjectPath,
    invoke_links,
    problem_doc,
)
from services.gateway.problems import Problem
from services.gateway.schemas import InvokeAccepted, InvokeRequest
from services.gateway.sessions import SESSION_HEADER, invoke_turn, session_of
from shared.custom_headers import within_limits
from shared.domain.execution import Execution
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys
from shared.store.ports import Store


def invoke_router(
    intake: Intake, keys: ApiKeys, conversations: Conversations, store: Store
) -> APIRouter:
    router = api_router()
    # Dependencies as defaults: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    invoker = Depends(access(keys, "invoke", WRITERS))

    @router.post(
        f"{API}/workspaces/{{workspace_id}}/invoke",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=InvokeAccepted,
        tags=["executions"],
        responses={
            202: {
                "description": "Accepted: the execution is stored and on its way to the agent",
                "links": invoke_links(),
            },
            400: problem_doc(INVOKE_REFUSALS),
            **BODY_RESPONSES,
        },
    )
    async def invoke(
        request: Request,
        project_id: ProjectPath,
        workspace_id: Identifier,
        body: InvokeRequest,
        response: Response,
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=256)] = None,
        x_session_id: Annotated[
            Identifier | None, Header(description="The session this message continues")
        ] = None,
        principal: ApiKey = invoker,
    ) -> InvokeAccepted:
        """Start an execution. The same idempotency key (body field or ``Idempotency-Key``
        header, the same in both if both are sent) returns the same execution. With a
        ``session_id`` (or ``X-Session-ID``), the execution is the session's next turn: the
        agent sees its earlier turns."""
        session_id = session_of(body.session_id, x_session_id)
        if session_id is not None:
            turn = await invoke_turn(
                conversations,
                store,
                project_id=project_id,
                workspace_id=workspace_id,
                session_id=session_id,
                body=body,
                key=principal,
                headers=within_limits(request.headers.items()),
            )
            response.headers[SESSION_HEADER] = session_id
            return accepted(turn, project_id, workspace_id)
        if body.multitask_strategy is not None:
            raise Problem(
                400,
                "invalid-request",
                "Invalid request",
                "multitask_strategy applies to a session's turn: send it with session_id",
            )
        execution = await intake.invoke(
            project_id=project_id,
            workspace_id=workspace_id,
            agent=body.agent,
            agent_input=body.agent_input(),
            idempotency_key=idempotency_key_of(body.idempotency_key, idempotency_key),
            requested_by=principal.principal,
            requester_identity=principal.identity,
            headers=within_limits(request.headers.items()),
        )
        return accepted(execution, project_id, workspace_id)

    return router


def accepted(execution: Execution, project_id: str, workspace_id: str) -> InvokeAccepted:
    """The 202: the execution, and the links to its routes."""
    path = f"/api/v1/projects/{project_id}/executions/{execution.execution_id}"
    scope = f"workspace_id={workspace_id}"
    turn = execution.input.turn
    return InvokeAccepted(
        execution_id=execution.execution_id,
        status=execution.status,
        agent=execution.agent,
        session_id=turn.thread_id if turn else None,
        turn=turn.turn if turn else None,
        links={
            "self": f"{path}?{scope}",
            "resume": f"{path}/resume?{scope}",
            "cancel": f"{path}/cancel?{scope}",
            "audit": f"{path}/audit?{scope}",
            "stream": f"{path}/stream?{scope}",
        },
    )
