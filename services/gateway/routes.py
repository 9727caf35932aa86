"""HTTP routes: translate requests to ``Intake`` calls and domain errors to problem documents."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response, status
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from services.gateway.auth import ANY_ROLE, OWNERS, WRITERS, access
from services.gateway.cursors import CursorScope, PageCursors
from services.gateway.intake import (
    Intake,
    ReviewAnswer,
)
from services.gateway.problems import Problem
from services.gateway.schemas import (
    AgentList,
    AgentView,
    ApprovalView,
    AuditTrail,
    CancelAccepted,
    CancelRequest,
    ExecutionPage,
    ExecutionView,
    InvokeAccepted,
    InvokeRequest,
    ResumeAccepted,
    ResumeRequest,
)
from shared.agents import AgentRegistry
from shared.custom_headers import (
    within_limits,
)
from shared.domain.execution import ExecutionStatus
from shared.events import Identifier
from shared.store.api_keys import ApiKey, ApiKeys

M = TypeVar("M", bound=BaseModel)

API = "/api/v1/projects/{project_id}"
WorkspaceQuery = Annotated[Identifier, Query(description="The workspace the execution belongs to")]
ProjectPath = Identifier


def problem_doc(description: str) -> dict[str, Any]:
    """An OpenAPI response answered with an RFC 9457 problem document."""
    return {"description": description, "content": {"application/problem+json": {}}}


PROBLEM_DESCRIPTIONS: dict[int | str, str] = {
    400: "Invalid request: a malformed body, parameter or value (the type names which)",
    401: "No valid API key (see WWW-Authenticate)",
    403: "The key's role may not do this, or self-approval is not allowed",
    404: "Not found",
    409: "Conflict",
    413: "Request body too large",
    429: "Rate limited (see Retry-After)",
    503: "A backing service is unavailable",
    # Also keeps FastAPI from documenting a 422 this API never sends (it answers 400).
    "4XX": "Another client error (415 for a body that is not JSON, 405 for a wrong method)",
}
PROBLEM_RESPONSES = {code: problem_doc(text) for code, text in PROBLEM_DESCRIPTIONS.items()}


BODY_RESPONSES: dict[int | str, dict[str, Any]] = {
    415: problem_doc(
        "The body is not declared JSON: send Content-Type: application/json (or another"
        " application/*+json type). A body without a Content-Type is refused too."
    )
}

EXECUTION = f"{API}/executions/{{execution_id}}"
STREAM = f"{EXECUTION}/stream"
"""Served by services/gateway/stream.py; the invoke route links to it."""


def operation_ref(path: str, method: str) -> str:
    """The OpenAPI ``operationRef`` of ``method path``: a JSON pointer into this document."""
    return "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method


def invoke_links() -> dict[str, Any]:
    """OpenAPI links from an invoke's 202 to every route that takes the execution it started:
    the id from the response, the project and workspace from the invoke's own path. By
    reference, not by operationId: FastAPI derives those from function names and paths."""
    scope = {
        "path.project_id": "$request.path.project_id",
        "path.execution_id": "$response.body#/execution_id",
        "query.workspace_id": "$request.path.workspace_id",
    }
    targets = {
        "GetExecution": (EXECUTION, "get", "The execution: status, pending review, result", {}),
        "GetAudit": (f"{EXECUTION}/audit", "get", "Who did what to the execution, and when", {}),
        "Resume": (f"{EXECUTION}/resume", "post", "Answer its review once it is suspended", {}),
        "Cancel": (f"{EXECUTION}/cancel", "post", "Stop it", {}),
        "Stream": (
            STREAM,
            "get",
            "Follow it as server-sent events, here until it waits for review or ends",
            {"query.until": "suspended"},
        ),
    }
    return {
        name: {
            "operationRef": operation_ref(path, method),
            "parameters": {**scope, **extra},
            "description": description,
        }
        for name, (path, method, description, extra) in targets.items()
    }


INVOKE_REFUSALS = (
    "Invalid request. Every refusal of what was sent is a 400, never a 422, and its problem"
    " type says which: `invalid-json` (malformed JSON), `invalid-utf8` (bytes that are not"
    " UTF-8), `invalid-request` (a body or parameter against the schema, naming the field),"
    " `empty-messages` (an empty `messages` list), `blank-message` (a blank `message` or"
    " message content), `idempotency-key-mismatch` (an `Idempotency-Key` header that differs"
    " from the body's `idempotency_key`) and `unknown-agent` (an agent this deployment does"
    " not run; `agents` lists those it does). An unknown agent is a 400 like the rest: like a"
    " decision outside a review's allowed list, it is a value the client can correct."
)


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for a request body declared by hand (``openapi_extra``), its
    nested models referred to in components/schemas, where the response models that use them
    put them. Pydantic's own ``#/$defs/...`` would point at the document's root, where there
    is nothing: schemathesis could not read the resume body and never tested it."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema


def is_json_media_type(content_type: str) -> bool:
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def body_refusal(content_type: str | None, body: bytes) -> Problem | None:
    """Why a request body cannot be read as JSON, said before FastAPI parses it (it would
    answer "Input should be a valid dictionary" and "There was an error parsing the body").

    Only a body is judged: an empty one has no media type to get wrong (the route then says
    whether it needs one). A body without a Content-Type is refused like any other that is not
    declared JSON: FastAPI does not parse it as JSON either (a browser may send one cross-site
    without a CORS preflight), and ``curl -d`` without ``-H`` declares a form, not JSON."""
    if not body:
        return None
    if content_type is None or not is_json_media_type(content_type):
        sent = f"a body of type {content_type}" if content_type else "a body without a Content-Type"
        return Problem(
            415,
            "unsupported-media-type",
            "Unsupported media type",
            f"this route reads JSON, and the request sent {sent}: send it with"
            " Content-Type: application/json (curl -d needs -H 'Content-Type: application/json')",
        )
    encoding = json.detect_encoding(body)
    try:
        body.decode(encoding)
    except UnicodeDecodeError as exc:
        return Problem(
            400,
            "invalid-utf8",
            "Body is not valid UTF-8",
            f"the JSON body is not valid {exc.encoding.upper()}: byte 0x{body[exc.start]:02x} at"
            f" offset {exc.start} ({exc.reason}); JSON is sent as UTF-8 text",
        )
    return None


class JsonBodyRoute(APIRoute):
    """A route whose body, when it has one, must be JSON: 415 for another media type and 400
    (``invalid-utf8``) for bytes that are not text, before FastAPI reads it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        if self.body_field is None:
            return handle

        async def checked(request: Request) -> Response:
            # The body is buffered already (services/gateway/limits.py), and Request caches it
            # for the handler below.
            refused = body_refusal(request.headers.get("content-type"), await request.body())
            if refused is not None:
                raise refused
            return await handle(request)

        return checked


def idempotency_key_of(in_body: str | None, in_header: str | None) -> str | None:
    """The request's idempotency key, from the body or the ``Idempotency-Key`` header; a 400
    when both are sent and differ (which would the client mean?)."""
    if in_body is not None and in_header is not None and in_body != in_header:
        raise Problem(
            400,
            "idempotency-key-mismatch",
            "Idempotency keys disagree",
            f"the Idempotency-Key header ({in_header!r}) and the body's idempotency_key"
            f" ({in_body!r}) differ: send one of them, or the same key in both",
        )
    return in_body if in_body is not None else in_header


def build_router(
    intake: Intake, registry: AgentRegistry, keys: ApiKeys, cursors: PageCursors
) -> APIRouter:
    router = APIRouter(responses=PROBLEM_RESPONSES, route_class=JsonBodyRoute)
    # Dependencies as defaults: the annotations are strings here (postponed), and FastAPI
    # cannot resolve names local to this function from a string.
    reader = Depends(access(keys, "reading", ANY_ROLE))
    invoker = Depends(access(keys, "invoke", WRITERS))
    reviewer = Depends(access(keys, "resume", OWNERS))
    canceller = Depends(access(keys, "cancel", OWNERS))

    @router.get(f"{API}/agents", response_model=AgentList, tags=["agents"])
    async def list_agents(
        project_id: ProjectPath, workspace_id: WorkspaceQuery, key: ApiKey = reader
    ) -> AgentList:
        """The agents this deployment can run."""
        return AgentList(
            items=[AgentView(name=a.name, description=a.description) for a in registry.all()]
        )

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
        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=256)] = None,
        principal: ApiKey = invoker,
    ) -> InvokeAccepted:
        """Start an execution. The same idempotency key (body field or ``Idempotency-Key``
        header, the same in both if both are sent) returns the same execution."""
        key = idempotency_key_of(body.idempotency_key, idempotency_key)
        execution = await intake.invoke(
            project_id=project_id,
            workspace_id=workspace_id,
            agent=body.agent,
            agent_input=body.agent_input(),
            idempotency_key=key,
            requested_by=principal.principal,
            requester_identity=principal.identity,
            headers=within_limits(request.headers.items()),
        )
        path = f"/api/v1/projects/{project_id}/executions/{execution.execution_id}"
        scope = f"workspace_id={workspace_id}"
        return InvokeAccepted(
            execution_id=execution.execution_id,
            status=execution.status,
            agent=execution.agent,
            links={
                "self": f"{path}?{scope}",
                "resume": f"{path}/resume?{scope}",
                "cancel": f"{path}/cancel?{scope}",
                "audit": f"{path}/audit?{scope}",
                "stream": f"{path}/stream?{scope}",
            },
        )

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

    @router.post(
        f"{EXECUTION}/resume",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=ResumeAccepted,
        tags=["executions"],
        responses=BODY_RESPONSES,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": body_schema(ResumeRequest)}},
            }
        },
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
        answer = ReviewAnswer(**body.model_dump())
        outcome = await intake.decide(
            project_id=project_id,
            workspace_id=workspace_id,
            execution_id=execution_id,
            answer=answer,
            reviewer=key.as_reviewer(),
            headers=within_limits(request.headers.items()),
        )
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

    @router.post(
        f"{EXECUTION}/cancel",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=CancelAccepted,
        tags=["executions"],
        responses=BODY_RESPONSES,
        openapi_extra={
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": body_schema(CancelRequest)}},
            }
        },
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


def json_object(raw: Any, model: type[M], *, required: bool) -> M:
    """Validate a JSON body against ``model``; every failure is a 400 naming the first error."""
    if raw is None and required:
        raise Problem(400, "invalid-request", "Invalid request", "request body is required")
    if raw is not None and not isinstance(raw, dict):
        raise Problem(
            400, "invalid-request", "Invalid request", "request body must be a JSON object"
        )
    try:
        return model.model_validate(raw or {})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise Problem(
            400,
            "invalid-request",
            "Invalid request",
            f"{where}: {first['msg']}",
            errors=json.loads(exc.json(include_url=False)),
        ) from exc


def parse_resume_body(raw: Any) -> ResumeRequest:
    if isinstance(raw, dict) and "human_review" in raw:
        raise Problem(
            400,
            "nested-decision",
            "Nested decision",
            'the resume body is flat: send {"decision": ..., "reviewer_notes": ...} at the top'
            " level, not inside 'human_review'",
        )
    return json_object(raw, ResumeRequest, required=True)
