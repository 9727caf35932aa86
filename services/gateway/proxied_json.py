"""JSON bodies on the LangGraph routes, whatever ``Content-Type`` a proxy forwards.

LangGraph's Agent Server reads a request's body as JSON whatever type it declares, and the
tools built on it rely on that: Agent Chat UI's production passthrough
(``langgraph-nextjs-api-passthrough``) forwards only ``x-*`` and ``authorization`` headers, so
its JSON arrives as ``text/plain;charset=UTF-8``. On the LangGraph routes the declared type is
therefore replaced by ``application/json`` before anything reads the body: the JSON limits scan
it (services/gateway/limits.py) and the routes parse it exactly as a body sent as JSON, with
the same refusals (``invalid-json``, ``invalid-utf8``, ...). The native API keeps answering 415
to a body that is not declared JSON.

Why this is safe: a key travels only in a header (``x-api-key`` or ``Authorization``), never in
a cookie, so a request a browser sends cross-site without a CORS preflight (a form, a
``text/plain`` fetch) carries no credentials, and is refused like any request without a key."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.bodies import is_json_media_type
from services.gateway.limits import route_path

LANGGRAPH_PATHS = "/langgraph/"


class JsonWhateverTypeMiddleware:
    """Requests whose path starts with ``prefix`` are read as JSON whatever ``Content-Type``
    they declare (or without one)."""

    def __init__(self, app: ASGIApp, *, prefix: str = LANGGRAPH_PATHS) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and route_path(scope).startswith(self.prefix):
            declared = Headers(scope=scope).get("content-type")
            if declared is None or not is_json_media_type(declared):
                # In place: the middlewares outside read what routing adds to this same scope
                # (the HTTP metrics' route label).
                scope["headers"] = [
                    *((name, value) for name, value in scope["headers"] if name != b"content-type"),
                    (b"content-type", b"application/json"),
                ]
        await self.app(scope, receive, send)
