"""RFC 9457 problem details: every error the API returns is ``application/problem+json``."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import anyio
import structlog
from aiokafka.errors import KafkaError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic_core import PydanticCustomError
from pymongo.errors import PyMongoError
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.errors import InterlockError, is_transient

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://interlock.dev/problems/"
RETRY_AFTER_SECONDS = 5


class Problem(InterlockError):
    """A refusal of the request itself (its body, headers, key or limits), raised from a route
    or a dependency with the problem given here. Errors of the domain carry their own problem
    as class attributes instead (shared/errors.py)."""

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
        self.problem_status = status
        self.problem_type = slug
        self.problem_title = title
        self.headers = headers
        self.extensions = extensions

    def problem_extensions(self) -> dict[str, Any]:
        return self.extensions


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
    return ProblemResponse(body, status_code=status, headers=headers)


class ProblemResponse(JSONResponse):
    """A problem document, which always renders (``json_safe``): the answer to a bad request
    must not fail on what the request sent, or the client gets a 500 instead of its 400."""

    media_type = PROBLEM_JSON

    def render(self, content: Any) -> bytes:
        return super().render(json_safe(content))


def json_safe(value: Any) -> Any:
    """``value`` with what no JSON text can hold written as text: a string with a lone surrogate
    (which UTF-8 cannot encode) gets its escape, ``"\\ud800"``; a float that is not finite its
    name, ``"inf"``; a key that is not a string, or any other object, its ``str()``. Nothing is
    dropped, so a problem's ``errors`` still say where and what."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {_safe_text(str(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return _safe_text(value if isinstance(value, str) else str(value))


def _safe_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


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


DRIVER_ERRORS = (PyMongoError, KafkaError, sqlite3.Error, TimeoutError)
"""What the drivers raise unwrapped: answered like Interlock's own errors (a 503 when
``is_transient``, the one retry rule), not left to the catch-all, after which the server logs
the error again as a crash."""


def unavailable_at(path: str, exc: BaseException) -> JSONResponse:
    log.warning("dependency.unavailable", error=repr(exc), path=path)
    return problem_at(
        path,
        503,
        "service-unavailable",
        "Service unavailable",
        "a backing service (database or broker) did not answer; retry later",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def client_gone(exc: BaseException) -> bool:
    """Is this only a client that went away mid-response (anyio's stream to it closed)?"""
    if isinstance(exc, BaseExceptionGroup):
        return all(client_gone(inner) for inner in exc.exceptions)
    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError)


def error_response(request: Request, exc: Exception) -> JSONResponse:
    """The problem document of any error: a transient failure is a 503, an ``InterlockError``
    answers with the problem it carries, and anything else (or an error that carries no problem
    of its own, a 500) is a bug, logged and never described to the client."""
    if is_transient(exc):
        return unavailable_at(request.url.path, exc)
    if client_gone(exc):
        # A stream's client closed it while an event or a keep-alive was being sent: nobody is
        # left to answer, and nothing went wrong on this side.
        log.info("request.client_gone", path=request.url.path)
        return problem_response(request, 499, "client-closed", "Client closed", "gone")
    if not isinstance(exc, InterlockError) or exc.problem_status >= 500:
        log.error("request.failed", path=request.url.path, exc_info=exc)
        return problem_response(
            request, 500, "internal-error", "Internal error", "an unexpected error; it was logged"
        )
    return problem_response(
        request,
        exc.problem_status,
        exc.problem_type,
        exc.problem_title,
        str(exc),
        exc.headers if isinstance(exc, Problem) else None,
        **exc.problem_extensions(),
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Every error becomes a problem document: one handler for Interlock's errors and the
    dependencies' (``error_response``), and FastAPI's own validation and HTTP errors."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        slug, title, detail, errors = _validation_problem(exc)
        return problem_response(request, 400, slug, title, detail, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        slug, title, detail = _http_problem(request, exc)
        headers = dict(exc.headers) if exc.headers else None
        return problem_response(request, exc.status_code, slug, title, detail, headers=headers)

    async def _error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, exc)

    for handled in (InterlockError, *DRIVER_ERRORS):
        app.add_exception_handler(handled, _error)
    # Anything else: Starlette sends this handler's answer, then lets the server log the error.
    app.add_exception_handler(Exception, _error)
