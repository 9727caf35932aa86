"""The gateway's pages: the Pending Reviews page at ``/reviews`` and the API docs at ``/docs``.

No build step and no server-side rendering: the review page is plain HTML, CSS and ES modules
that talk to the same gateway's JSON API with the reviewer's API key, so it can do nothing a key
could not do with curl. ``/docs`` is Swagger UI from the installed ``fastapi-offline`` package
(no CDN). Both are sent with the same frame, sniffing and referrer protection and a Content
Security Policy that admits this origin only. ``install_review_page(app)`` and
``install_api_docs(app)`` are the entry points.

The page reads ``/reviews/config`` for what to put in its sign-in form: in development the
project and workspace of the development key, so the first sign-in needs only the key; elsewhere
nothing. The key itself is never sent: a page anyone may load must not hand one out.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse
from starlette.responses import Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

PAGE_PATH = "/reviews"
CONFIG_PATH = f"{PAGE_PATH}/config"
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


@dataclass(frozen=True)
class SignInDefaults:
    """What the sign-in form starts with. Only names, never a key."""

    project: str
    workspace: str = "default"

    def as_config(self) -> dict[str, str]:
        return {"project": self.project, "workspace": self.workspace}


def install_review_page(app: FastAPI, *, sign_in: SignInDefaults | None = None) -> None:
    """Serve the page at ``/reviews``, its sign-in defaults at ``/reviews/config`` (``sign_in``,
    or nothing), its assets under ``/reviews/static/``, and send ``/`` there unless the app
    already answers ``/``."""
    root_taken = any(isinstance(r, Route) and r.path == "/" for r in app.router.routes)
    config = sign_in.as_config() if sign_in is not None else {}

    @app.get(PAGE_PATH, include_in_schema=False)
    async def review_page() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html", media_type="text/html", headers=SECURITY_HEADERS
        )

    @app.get(CONFIG_PATH, include_in_schema=False)
    async def review_page_config() -> JSONResponse:
        return JSONResponse(config, headers=SECURITY_HEADERS)

    app.mount(STATIC_PATH, _SecuredStaticFiles(directory=STATIC_DIR), name="review-page-static")

    if not root_taken:

        @app.get("/", include_in_schema=False)
        async def root() -> RedirectResponse:
            return RedirectResponse(PAGE_PATH, status_code=307)


DOCS_PATH = "/docs"
DOCS_STATIC_PATH = f"{DOCS_PATH}/static"
SWAGGER_UI_DIR = Path(fastapi_offline.__file__).parent / "static"
"""swagger-ui-bundle.js, swagger-ui.css and favicon.png, vendored by fastapi-offline."""
SWAGGER_UI_PARAMETERS = {
    # Swagger UI would otherwise send the document's URL to validator.swagger.io for a badge.
    "validatorUrl": None,
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_content_security_policy(html: str) -> str:
    """The review page's policy, admitting the one inline script of Swagger UI's page by its
    hash (it starts the bundle with this gateway's OpenAPI URL); images also from ``data:``
    (the icons in swagger-ui.css); inline styles, which Swagger UI sets as it renders."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(html)
    )
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' {hashes}".rstrip(),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def install_api_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` from the installed package; create ``app`` with
    ``docs_url=None`` (FastAPI's own page loads Swagger UI from a CDN) and ``redoc_url=None``."""
    if not (SWAGGER_UI_DIR / "swagger-ui-bundle.js").is_file():
        raise RuntimeError(f"Swagger UI is missing from {SWAGGER_UI_DIR} (fastapi-offline)")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def api_docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - API",
            swagger_js_url=f"{root}{DOCS_STATIC_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_STATIC_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_STATIC_PATH}/favicon.png",
            oauth2_redirect_url=None,
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )
        html = bytes(page.body).decode()
        headers = {
            **SECURITY_HEADERS,
            "Content-Security-Policy": docs_content_security_policy(html),
        }
        return HTMLResponse(html, headers=headers)

    app.mount(
        DOCS_STATIC_PATH, _SecuredStaticFiles(directory=SWAGGER_UI_DIR), name="api-docs-static"
    )
