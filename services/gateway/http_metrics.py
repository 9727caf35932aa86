"""Request rate, errors and latency of the API, per route template (not per raw path: ids in
paths would make a series per execution)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared import metrics

UNMATCHED = "unmatched"
"""The route label of a request turned away before routing (rate limit, body limit) or of a
path no route serves."""
PREFLIGHT = "preflight"
"""The route label of a browser's CORS preflight, answered before routing
(services/gateway/cors.py)."""


class HttpMetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def observe_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, observe_status)
        finally:
            # FastAPI puts the matched route in the scope while routing.
            method = str(scope.get("method", ""))
            route = getattr(scope.get("route"), "path", None) or (
                PREFLIGHT if method == "OPTIONS" and _asks_cors(scope) else UNMATCHED
            )
            metrics.HTTP_REQUESTS.labels(method, route, str(status)).inc()
            metrics.HTTP_REQUEST_SECONDS.labels(method, route).observe(
                time.perf_counter() - started
            )


def _asks_cors(scope: Scope) -> bool:
    return any(name == b"access-control-request-method" for name, _ in scope["headers"])
