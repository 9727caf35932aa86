"""What the OpenAPI document says beyond the routes' own signatures: the problem responses every
route may answer, the 415 of routes that read a body, and the links from an invoke's 202."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from pydantic import BaseModel

from shared.events import Identifier

API = "/api/v1/projects/{project_id}"
EXECUTION = f"{API}/executions/{{execution_id}}"
STREAM = f"{EXECUTION}/stream"
"""Served by services/gateway/stream.py; the invoke route links to it."""

ProjectPath = Identifier
WorkspaceQuery = Annotated[Identifier, Query(description="The workspace the execution belongs to")]


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


def json_body(model: type[BaseModel], *, required: bool) -> dict[str, Any]:
    """A route's ``openapi_extra`` declaring its JSON request body as ``model``: for the routes
    that parse their body themselves (to answer a malformed one with its own problem type)."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": body_schema(model)}},
        }
    }


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for a request body declared by hand (``openapi_extra``), its
    nested models referred to in components/schemas, where the response models that use them
    put them. Pydantic's own ``#/$defs/...`` would point at the document's root, where there
    is nothing: schemathesis could not read the resume body and never tested it."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema
