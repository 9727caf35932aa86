"""A browser reaching the gateway (issue 34): CORS preflights answered on every route for the
origins ``INTERLOCK_CORS_ORIGINS`` names (in development, pages of this machine on any port;
elsewhere none unless configured), the headers LangGraph's clients send allowed and the ones
they read exposed, on answers and problems alike; and the LangGraph routes reading JSON bodies
whatever ``Content-Type`` a proxy forwards, as Agent Chat UI's passthrough sends them, with
every limit of a JSON body still applied. Built with ``create_app`` on the in-process
services."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.crypto import new_key_entry
from shared.senders import new_key_pair
from shared.store.api_keys import Role, create_key
from tests.unit.inprocess import World
from tests.unit.test_metrics import deltas

LANGGRAPH = "/langgraph/projects/p1/workspaces/w1"
AGENTS = "/api/v1/projects/p1/agents"
CHAT_UI = "http://localhost:3000"
"""Where Agent Chat UI's development server serves it."""
SDK_HEADERS = "content-type,x-api-key,x-auth-scheme,last-event-id,x-interlock-custom-token"
"""What the JS client and Agent Chat UI send: the key, its scheme, a resumed stream's last
event, and a caller's custom header."""
PASSTHROUGH = {"content-type": "text/plain;charset=UTF-8"}
"""How langgraph-nextjs-api-passthrough forwards a JSON body."""


@asynccontextmanager
async def gateway(
    world: World, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    if settings.get("environment") == "production":
        settings.setdefault("encryption_keys", new_key_entry())
        settings.setdefault("decision_signing_key", f"k1:{new_key_pair()[0]}")
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", **settings)
    app = create_app(built, store=world.store, publisher=world.bus)
    _, key = await create_key(world.store.api_keys, project_id="p1", role=Role.OWNER, name="o")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"x-api-key": key},
    ) as http:
        yield http


async def preflight(
    http: httpx.AsyncClient, path: str, origin: str, method: str = "POST"
) -> httpx.Response:
    return await http.options(
        path,
        headers={
            "origin": origin,
            "access-control-request-method": method,
            "access-control-request-headers": SDK_HEADERS,
        },
    )


def allowed(answer: httpx.Response, origin: str) -> bool:
    return answer.headers.get("access-control-allow-origin") == origin


async def test_development_allows_this_machines_pages_on_every_route(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway(world, monkeypatch) as http:
        for origin in (CHAT_UI, "http://127.0.0.1:5173", "http://[::1]:8080", "http://localhost"):
            for path, method in (
                (f"{LANGGRAPH}/threads/search", "POST"),
                (f"{LANGGRAPH}/threads/t-1/runs/stream", "POST"),
                (f"{LANGGRAPH}/threads/t-1", "PATCH"),
                (f"{LANGGRAPH}/threads/t-1", "DELETE"),
                (f"{LANGGRAPH}/info", "GET"),
                (AGENTS, "GET"),
            ):
                answer = await preflight(http, path, origin, method)
                assert answer.status_code == 200, f"{origin} {method} {path}: {answer.text}"
                assert allowed(answer, origin), answer.headers
                assert method in answer.headers["access-control-allow-methods"]
                # Every header asked for, as LangGraph's server allows them: the origin is the
                # gate, and no credentials ride along (keys are headers, never cookies).
                assert answer.headers["access-control-allow-headers"] == SDK_HEADERS
                assert "access-control-allow-credentials" not in answer.headers
        for stranger in ("https://evil.example", "http://localhost.evil.example:3000"):
            refused = await preflight(http, f"{LANGGRAPH}/threads/search", stranger)
            assert refused.status_code == 400, refused.text
            assert "access-control-allow-origin" not in refused.headers


async def test_elsewhere_no_page_is_allowed_until_configured(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway(world, monkeypatch, environment="production") as http:
        refused = await preflight(http, f"{LANGGRAPH}/threads/search", CHAT_UI)
        assert refused.status_code == 400 and not allowed(refused, CHAT_UI)
        # The request itself is served (curl and servers send no Origin to be refused by), but
        # a browser cannot read the answer: no Access-Control-Allow-Origin.
        read = await http.get(AGENTS, params={"workspace_id": "w1"}, headers={"origin": CHAT_UI})
        assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
    configured = {"environment": "production", "cors_origins": "https://chat.example.com"}
    async with gateway(world, monkeypatch, **configured) as http:
        answer = await preflight(http, f"{LANGGRAPH}/threads/search", "https://chat.example.com")
        assert answer.status_code == 200 and allowed(answer, "https://chat.example.com")
        local = await preflight(http, f"{LANGGRAPH}/threads/search", CHAT_UI)
        assert local.status_code == 400, "configured origins replace the development default"
    async with gateway(world, monkeypatch, cors_origins="*") as http:
        anyone = await preflight(http, f"{LANGGRAPH}/threads/search", "https://any.example")
        assert anyone.status_code == 200 and allowed(anyone, "*")


async def test_answers_and_problems_carry_what_a_page_needs_to_read_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway(world, monkeypatch, rate_limit_burst=2) as http:
        origin = {"origin": CHAT_UI}
        created = await http.post(f"{LANGGRAPH}/threads", json={}, headers=origin)
        assert created.status_code == 200, created.text
        assert allowed(created, CHAT_UI)
        exposed = {h.strip() for h in created.headers["access-control-expose-headers"].split(",")}
        # onRunCreated reads Content-Location; a dropped wait reconnects to Location; a refused
        # request says when to retry; a search says what is left.
        assert {"Content-Location", "Location", "Retry-After", "X-Pagination-Next"} <= exposed
        keyless = await http.get(f"{LANGGRAPH}/threads/x", headers={**origin, "x-api-key": ""})
        assert keyless.status_code == 401 and allowed(keyless, CHAT_UI)
        missing = await http.get(f"{LANGGRAPH}/threads/x", headers=origin)
        assert missing.status_code == 404 and allowed(missing, CHAT_UI)
        limited = await http.get(f"{LANGGRAPH}/threads/x", headers=origin)
        assert limited.status_code == 429, limited.text  # the key's third of a burst of two
        assert allowed(limited, CHAT_UI) and limited.headers["retry-after"]


async def test_a_preflight_is_counted_as_one(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    moved = deltas(
        (
            "interlock_http_requests_total",
            {"method": "OPTIONS", "route": "preflight", "status": "200"},
        )
    )
    async with gateway(world, monkeypatch) as http:
        await preflight(http, f"{LANGGRAPH}/threads/search", CHAT_UI)
    assert moved() == [1]


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("https://chat.example.com/", "trailing slash"),
        ("chat.example.com", "scheme://host"),
        ("ftp://chat.example.com", "scheme://host"),
        ("https://chat.example.com:99999", "Port"),
    ],
)
def test_an_origin_is_written_as_a_browser_sends_it(given: str, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        GatewaySettings(cors_origins=given)
    assert says.lower() in str(refused.value).lower()
    listed = GatewaySettings(cors_origins=" https://a.example , http://b.example:8080 ,")
    assert listed.cors_origin_list == ["https://a.example", "http://b.example:8080"]


# --- JSON whatever the Content-Type, on the LangGraph routes ----------------------------------


async def test_the_langgraph_routes_read_json_sent_as_text_plain(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = "/langgraph/projects/{project_id}/workspaces/{workspace_id}/threads"
    counted: Callable[[], list[float]] = deltas(
        ("interlock_http_requests_total", {"method": "POST", "route": route, "status": "200"})
    )
    async with gateway(world, monkeypatch) as http:
        created = await http.post(
            f"{LANGGRAPH}/threads",
            content=b'{"thread_id": "proxied-1", "metadata": {"via": "passthrough"}}',
            headers=PASSTHROUGH,
        )
        assert created.status_code == 200, created.text
        assert created.json()["metadata"] == {"via": "passthrough"}
        # Without any Content-Type too, and the search finds the thread as JSON would.
        found = await http.post(
            f"{LANGGRAPH}/threads/search",
            content=b'{"metadata": {"via": "passthrough"}}',
            headers={"content-type": ""},
        )
        assert [t["thread_id"] for t in found.json()] == ["proxied-1"]
    # The route is still the metrics' label: the request was routed as itself.
    assert counted() == [1]


@pytest.mark.parametrize(
    ("body", "status", "problem"),
    [
        (b"[" * 40 + b"]" * 40, 400, "json-too-deep"),
        (b'{"limit": 1e400}', 400, "json-number-out-of-range"),
        (b'{"limit": 10,', 400, "invalid-json"),
        (b'{"limit": "\xc3\x28"}', 400, "invalid-utf8"),
        (b'["not", "an object"]', 400, "invalid-request"),
    ],
)
async def test_text_plain_json_meets_every_rule_of_a_json_body(
    world: World, monkeypatch: pytest.MonkeyPatch, body: bytes, status: int, problem: str
) -> None:
    async with gateway(world, monkeypatch) as http:
        answer = await http.post(f"{LANGGRAPH}/threads/search", content=body, headers=PASSTHROUGH)
        assert answer.status_code == status, answer.text
        assert answer.json()["type"].endswith(f"/{problem}"), answer.text


async def test_the_native_api_still_asks_for_json(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway(world, monkeypatch) as http:
        answer = await http.post(
            "/api/v1/projects/p1/workspaces/w1/invoke",
            content=b'{"agent": "refund-approval", "message": "hi"}',
            headers=PASSTHROUGH,
        )
        assert answer.status_code == 415, answer.text
        assert "text/plain" in answer.json()["detail"]
