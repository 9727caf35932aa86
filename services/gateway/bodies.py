"""Request bodies: JSON only, each refusal a 400 (or 415) that says what was wrong, before and
after FastAPI reads the body."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from services.gateway.openapi import PROBLEM_RESPONSES
from services.gateway.problems import Problem
from services.gateway.schemas import ResumeRequest

M = TypeVar("M", bound=BaseModel)


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


def json_object(raw: Any, model: type[M], *, required: bool) -> M:
    """Validate a JSON body against ``model``; every failure is a 400 naming the first error.

    The errors leave out the input that failed: the client has it, and echoing it back would
    return a string of up to the body's size, or a value the answer cannot hold."""
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
            errors=exc.errors(include_url=False, include_input=False),
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


def api_router() -> APIRouter:
    """A router of the API: its routes document the problems they may answer, and refuse a body
    that is not JSON before FastAPI reads it."""
    return APIRouter(responses=PROBLEM_RESPONSES, route_class=JsonBodyRoute)
