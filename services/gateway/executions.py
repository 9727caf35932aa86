"""Reading executions: one (``GET .../executions/{id}``), its audit trail, and a page of them;
and ``POST .../executions/{id}/cancel``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, status

from services.gateway.auth import ANY_ROLE, access
from services.gateway.bodies import api_router, json_object
from services.gateway.cursors import CursorScope, PageCursors
from services.gateway.intake import Intake
from services.gateway.openapi import (
    API,
    BODY_RESPONSES,
    EXECUTION,
    ProjectPath,
    WorkspaceQuery,
    json_body,
)
from services.gateway.schemas import (
    ApprovalView,
    AuditTrail,
    CancelAccepted,
    CancelRequest,
    ExecutionPage,
    ExecutionView,
)
from shared.domain.execution import ExecutionStatus
from shared.events import Identifier
from shared.store.api_keys import CANCELLING_ROLES, ApiKey, ApiKeys


def executions_router(intake: Intake, keys: ApiKeys, cursors: PageCursors) -> APIRouter:
    """Reading executions."""
    router = api_router()
    # Dependencies as defaults: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    reader = Depends(access(keys, "reading", ANY_ROLE))

    @router.get(EXECUTION, response_model=ExecutionView, tags=["executions"])
    async def get_execution(
        project_id: ProjectPath,
        execution_id: Identifier,
        workspace_id: WorkspaceQuery,
        key: ApiKey = reader,
    ) -> ExecutionView:
        execution = await intake.get(project_id, workspace_id, execution_id)
        view = ExecutionView.of(execution)
        view.approvals = [ApprovalView.of(a) for a in await intake.approvals_of(execution)]
        return view

    @router.get(f"{EXECUTION}/audit", response_model=AuditTrail, tags=["executions"])
    async def get_audit(
        project_id: ProjectPath,
        execution_id: Identifier,
        workspace_id: WorkspaceQuery,
        key: ApiKey = reader,
    ) -> AuditTrail:
        """Every status change and rejected decision of the execution: who, when and why."""
        execution = await intake.get(project_id, workspace_id, execution_id)
        return AuditTrail(
            execution_id=execution_id,
            items=execution.audit,
            decisions=ExecutionView.of(execution).decisions,
            approvals=[ApprovalView.of(a) for a in await intake.approvals_of(execution)],
        )

    @router.get(f"{API}/executions", response_model=ExecutionPage, tags=["executions"])
    async def list_executions(
        project_id: ProjectPath,
        workspace_id: WorkspaceQuery,
        status_filter: Annotated[ExecutionStatus | None, Query(alias="status")] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=1024)] = None,
        key: ApiKey = reader,
    ) -> ExecutionPage:
        """Executions oldest first; ``status=suspended`` lists the pending reviews."""
        scope = CursorScope.of(
            "executions",
            project_id,
            key,
            workspace_id=workspace_id,
            status=status_filter.value if status_filter else None,
        )
        page = await intake.list_executions(
            project_id, workspace_id, status_filter, limit, cursors.open(cursor, scope)
        )
        return ExecutionPage(
            items=[ExecutionView.of(e) for e in page.items],
            next_cursor=cursors.seal(page.next_cursor, scope),
        )

    return router


def cancel_router(intake: Intake, keys: ApiKeys) -> APIRouter:
    router = api_router()
    canceller = Depends(
        access(keys, "cancel", CANCELLING_ROLES)
    )  # a default: see executions_router

    @router.post(
        f"{EXECUTION}/cancel",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=CancelAccepted,
        tags=["executions"],
        responses=BODY_RESPONSES,
        openapi_extra=json_body(CancelRequest, required=False),
    )
    async def cancel(
        project_id: ProjectPath,
        execution_id: Identifier,
        workspace_id: WorkspaceQuery,
        raw: Annotated[Any, Body(include_in_schema=False)] = None,
        key: ApiKey = canceller,
    ) -> CancelAccepted:
        """Stop an execution (pending, running, suspended or resuming); 409 once it ended."""
        body = json_object(raw, CancelRequest, required=False)
        await intake.cancel(
            project_id=project_id,
            workspace_id=workspace_id,
            execution_id=execution_id,
            reason=body.reason,
            requested_by=key.principal,
        )
        return CancelAccepted(execution_id=execution_id)

    return router
