"""``POST .../executions/{id}/resume``: a reviewer's decision on a suspended execution."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request, status

from services.gateway.answers import DecisionOutcome, ReviewAnswer
from services.gateway.auth import access
from services.gateway.bodies import api_router, parse_resume_body
from services.gateway.intake import Intake
from services.gateway.openapi import (
    BODY_RESPONSES,
    EXECUTION,
    ProjectPath,
    WorkspaceQuery,
    json_body,
)
from services.gateway.schemas import ResumeAccepted, ResumeRequest
from shared.custom_headers import within_limits
from shared.events import Identifier
from shared.store.api_keys import DECIDING_ROLES, ApiKey, ApiKeys


def resume_router(intake: Intake, keys: ApiKeys) -> APIRouter:
    router = api_router()
    # Dependencies as defaults: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    reviewer = Depends(access(keys, "resume", DECIDING_ROLES))

    @router.post(
        f"{EXECUTION}/resume",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=ResumeAccepted,
        tags=["executions"],
        responses=BODY_RESPONSES,
        openapi_extra=json_body(ResumeRequest, required=True),
    )
    async def resume(
        request: Request,
        project_id: ProjectPath,
        execution_id: Identifier,
        workspace_id: WorkspaceQuery,
        raw: Annotated[Any, Body(include_in_schema=False)] = None,
        key: ApiKey = reviewer,
    ) -> ResumeAccepted:
        """Submit the reviewer's decision for a suspended execution: the flat Atlas body, or
        LangChain's ``decisions`` list for action suspensions (see ResumeRequest)."""
        body = parse_resume_body(raw)
        outcome = await intake.decide(
            project_id=project_id,
            workspace_id=workspace_id,
            execution_id=execution_id,
            answer=ReviewAnswer(**body.model_dump()),
            reviewer=key.as_reviewer(),
            headers=within_limits(request.headers.items()),
        )
        return accepted(execution_id, outcome)

    return router


def accepted(execution_id: str, outcome: DecisionOutcome) -> ResumeAccepted:
    """The 202: the decision published, or the approval recorded toward it."""
    resolution = outcome.resolution
    return ResumeAccepted(
        execution_id=execution_id,
        suspension_id=outcome.suspension_id,
        generation=outcome.suspension_id,
        decision=resolution.summary,
        interrupt_id=next(iter(resolution.values)),
        status="awaiting_approvals" if outcome.awaiting else "accepted",
        approvals=[a.reviewer for a in outcome.approvals],
        approvals_required=outcome.approvals_required,
        discounted_approvals=outcome.discounted,
    )
