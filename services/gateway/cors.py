"""Cross-origin requests from browsers (CORS): which pages may call the API from another
origin, for LangChain's Agent Chat UI and Agent Inbox, or any page built on
``@langchain/langgraph-sdk``, talking to the gateway directly.

Starlette's ``CORSMiddleware`` does the protocol; this module only decides its settings. A key
travels in a header (``x-api-key`` or ``Authorization``), never in a cookie, so no credentials
are allowed: a page of an allowed origin can do only what the key its user typed in allows, and
a page of any other origin gets nothing a browser would send on its own. Hence every header a
client asks for is allowed (as LangGraph's Agent Server does): the origin is the gate."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?"
"""Pages served from this machine, on any port: what development allows with no setting."""

EXPOSED_HEADERS = (
    "Content-Location",
    "Location",
    "Retry-After",
    "X-Pagination-Total",
    "X-Pagination-Next",
    "X-Session-ID",
)
"""The response headers a page's script may read: where a run is (``Content-Location``, which
the JS client's ``onRunCreated`` reads, and the ``Location`` it reconnects to), when to retry,
the pages of a search, and the session an invoke continued."""

METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def parse_origins(value: str) -> list[str]:
    """The origins of ``INTERLOCK_CORS_ORIGINS`` (comma-separated), each checked: ``*`` or a
    ``scheme://host[:port]`` of http or https, with no path (a browser's ``Origin`` has none,
    so ``https://chat.example.com/`` would never match)."""
    origins = [entry.strip() for entry in value.split(",") if entry.strip()]
    for origin in origins:
        if origin == "*":
            continue
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"INTERLOCK_CORS_ORIGINS: {origin!r} is not an origin: write it as a browser"
                " sends it, scheme://host[:port] (https://chat.example.com), or *"
            )
        if parts.path or parts.query or parts.fragment or parts.username:
            raise ValueError(
                f"INTERLOCK_CORS_ORIGINS: {origin!r} has more than an origin: leave out any"
                f" path, even a trailing slash ({parts.scheme}://{parts.netloc})"
            )
        try:
            parts.port  # noqa: B018 -- raises on a port that is no number or out of range
        except ValueError as exc:
            raise ValueError(f"INTERLOCK_CORS_ORIGINS: {origin!r}: {exc}") from None
    return origins


def cors_middleware(app: ASGIApp, *, origins: list[str], local_by_default: bool) -> CORSMiddleware:
    """Starlette's CORS middleware for the configured ``origins``; with none configured and
    ``local_by_default`` (development), pages served from this machine on any port.

    A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered here for every
    path, before the rate limit and the routes: it carries no key and costs nothing. Private
    network access (a page on a public origin calling a gateway on this machine or a private
    address, as LangSmith Studio does) is allowed to the same origins."""
    regex = LOCAL_ORIGINS if not origins and local_by_default else None
    return CORSMiddleware(
        app,
        allow_origins=origins,
        allow_origin_regex=regex,
        allow_methods=METHODS,
        allow_headers=["*"],
        allow_credentials=False,
        allow_private_network=True,
        expose_headers=EXPOSED_HEADERS,
    )
