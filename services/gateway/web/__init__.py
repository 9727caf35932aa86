"""The Pending Reviews page: static HTML, CSS and ES modules the gateway serves at ``/reviews``.

No build step and no server-side rendering: the page is plain files that talk to the same
gateway's JSON API with the reviewer's API key, so it can do nothing a key could not do with
curl. ``install_review_page(app)`` is the only entry point.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from starlette.responses import Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

PAGE_PATH = "/reviews"
STATIC_PATH = f"{PAGE_PATH}/static"
STATIC_DIR = Path(__file__).parent / "static"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        # Everything from this origin only, and no inline script or style: the page renders API
        # data (agent output, reviewer notes), so an injection must have nowhere to run.
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Revalidate every time (ETag / Last-Modified make that cheap): after an upgrade a reviewer
    # must not run yesterday's app.js against today's API.
    "Cache-Control": "no-cache",
}


class _SecuredStaticFiles(StaticFiles):
    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(SECURITY_HEADERS)
        return response


def install_review_page(app: FastAPI) -> None:
    """Serve the page at ``/reviews``, its assets under ``/reviews/static/``, and send ``/``
    there unless the app already answers ``/``."""
    root_taken = any(isinstance(r, Route) and r.path == "/" for r in app.router.routes)

    @app.get(PAGE_PATH, include_in_schema=False)
    async def review_page() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html", media_type="text/html", headers=SECURITY_HEADERS
        )

    app.mount(STATIC_PATH, _SecuredStaticFiles(directory=STATIC_DIR), name="review-page-static")

    if not root_taken:

        @app.get("/", include_in_schema=False)
        async def root() -> RedirectResponse:
            return RedirectResponse(PAGE_PATH, status_code=307)
