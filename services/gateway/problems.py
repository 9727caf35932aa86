"""RFC 9457 problem details: every error the API returns is ``application/problem+json``."""

from __future__ import annotations

from typing import Any

import structlog
from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic_core import PydanticCustomError
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


def refusal(slug: str, title: str, detail: str) -> PydanticCustomError:
    """A validation error (raise it from a request model's validator) that is answered as a
    problem of its own type, ``slug``, rather than the generic ``invalid-request``."""
    return PydanticCustomError(slug, detail, {_OWN_PROBLEM: title})


_OWN_PROBLEM = "problem_title"


def _validation_problem(exc: RequestValidationError) -> tuple[str, str, str, list[dict[str, Any]]]:
    """The slug, title and detail of a request that failed validation, and its errors."""
    raw = exc.errors()
    errors = []
    for error in raw[:20]:
        location = [str(p) for p in error.get("loc", ())]
        errors.append({"location": location, "message": error.get("msg", "invalid")})
    first = raw[0] if raw else {}
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "")
        where = first.get("loc", ("body", 0))[-1]
        return (
            "invalid-json",
            "Body is not valid JSON",
            f"request body is not valid JSON: {reason} (at character {where})",
            errors,
        )
    own_title = (first.get("ctx") or {}).get(_OWN_PROBLEM)
    if own_title is not None:
        return str(first["type"]), str(own_title), str(first.get("msg")), errors
    summary = "; ".join(f"{'.'.join(e['location'])}: {e['message']}" for e in errors[:3])
    return "invalid-request", "Invalid request", summary or "request is invalid", errors


def _http_problem(request: Request, exc: StarletteHTTPException) -> tuple[str, str, str]:
    """Starlette's own 404 and 405 say only "Not Found"; say what was not found, and what is
    allowed (the CLI prints title and detail, and "Not Found: Not Found" helped nobody)."""
    method = request.method
    # As sent: a %2F in an id decodes to "/", which is why such a path matches no route.
    raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode()
    sent = raw_path.partition(b"?")[0].decode("latin-1")
    if exc.status_code == 404 and "route" not in request.scope:
        # An id is one path segment: a %2F in it is a "/" to the router.
        slash = " (%2F in a path is a '/', and no id holds one)" if "%2f" in sent.lower() else ""
        return (
            "not-found",
            "Not found",
            f"nothing at {method} {sent}: no route of this API matches the path{slash}"
            " (the routes are listed in /openapi.json)",
        )
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        return (
            "method-not-allowed",
            "Method not allowed",
            f"{method} is not allowed on {sent}" + (f"; allowed: {allowed}" if allowed else ""),
        )
    slug = {404: "not-found"}.get(exc.status_code, "http-error")
    return slug, str(exc.detail), str(exc.detail)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(
            request, exc.status, exc.slug, exc.title, exc.detail, exc.headers, **exc.extensions
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        slug, title, detail, errors = _validation_problem(exc)
        return problem_response(request, 400, slug, title, detail, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        slug, title, detail = _http_problem(request, exc)
        headers = dict(exc.headers) if exc.headers else None
        return problem_response(request, exc.status_code, slug, title, detail, headers=headers)

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
