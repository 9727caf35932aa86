"""RFC 9457 problem details: every error the API returns is ``application/problem+json``."""

from __future__ import annotations

from typing import Any

import structlog
from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pymongo.errors import PyMongoError
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.errors import RetryableError

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://interlock.dev/problems/"
RETRY_AFTER_SECONDS = 5


class Problem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.headers = headers
        self.extensions = extensions


def problem_at(
    path: str,
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """The problem document for a request to ``path`` (also used by the ASGI middleware,
    which runs outside FastAPI's exception handlers)."""
    body = {
        "type": TYPE_BASE + slug,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": path,
        **extensions,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def problem_response(
    request: Request,
    status: int,
    slug: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    return problem_at(request.url.path, status, slug, title, detail, headers, **extensions)


def _validation_detail(exc: RequestValidationError) -> tuple[str, list[dict[str, Any]]]:
    errors = []
    for error in exc.errors()[:20]:
        location = [str(p) for p in error.get("loc", ())]
        errors.append({"location": location, "message": error.get("msg", "invalid")})
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return "request body is not valid JSON", errors
    summary = "; ".join(f"{'.'.join(e['location'])}: {e['message']}" for e in errors[:3])
    return summary or "request is invalid", errors


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.slug, exc.title, exc.detail, exc.headers, **exc.extensions
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, errors = _validation_detail(exc)
        return problem_response(
            request, 400, "invalid-request", "Invalid request", detail, errors=errors
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        slug = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
        return problem_response(
            request,
            exc.status_code,
            slug,
            str(exc.detail),
            str(exc.detail),
            headers=dict(exc.headers) if exc.headers else None,
        )

    async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning("dependency.unavailable", error=repr(exc), path=request.url.path)
        return problem_response(
            request,
            503,
            "service-unavailable",
            "Service unavailable",
            "a backing service (database or broker) did not answer; retry later",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    # The database or the broker failing is never the client's fault, and a retry may succeed.
    for dependency_error in (RetryableError, PyMongoError, KafkaError, TimeoutError):
        app.add_exception_handler(dependency_error, _unavailable)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request.failed", path=request.url.path)
        return problem_response(
            request, 500, "internal-error", "Internal error", "an unexpected error; it was logged"
        )
