"""The gateway's edge as an attacker meets it (issue 17): rate limits keyed on the key that
authenticated and on the real client address, the development key refused outside development,
NaN bodies, the cancel route's own role message, and /docs served from the installed package
with the review page's protections. Built with ``create_app`` on the in-process services."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError
from starlette.datastructures import Headers
from structlog.testing import capture_logs

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.gateway.auth import (
    GatewayKeys,
    bearer_secret,
    presented_secret,
    warn_if_development_key_present,
)
from shared.crypto import new_key_entry
from shared.senders import new_key_pair
from shared.store.api_keys import DEVELOPMENT_KEY_ID, ApiKey, ApiKeys, Role, create_key
from tests.unit.inprocess import World

DEV_SECRET = "ilk_00000000000000de_development-key-not-for-production-use-000"
AGENTS = "/api/v1/projects/p1/agents"
PROBLEM = "application/problem+json"


class CountingKeys:
    """The key store, counting reads (one per request is the budget)."""

    def __init__(self, keys: ApiKeys) -> None:
        self.keys = keys
        self.reads: list[str] = []

    async def add(self, key: ApiKey) -> None:
        await self.keys.add(key)

    async def get(self, key_id: str) -> ApiKey | None:
        self.reads.append(key_id)
        return await self.keys.get(key_id)

    async def list(self, project_id: str) -> list[ApiKey]:
        return await self.keys.list(project_id)

    async def revoke(self, project_id: str, key_id: str) -> bool:
        return await self.keys.revoke(project_id, key_id)


@pytest.fixture
def counted(world: World) -> Iterator[CountingKeys]:
    original = world.store.api_keys
    counting = CountingKeys(original)
    world.store.api_keys = counting  # type: ignore[assignment]
    yield counting
    world.store.api_keys = original


def gateway(
    world: World, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> tuple[FastAPI, GatewaySettings]:
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    if settings.get("environment") == "production":
        settings.setdefault("encryption_keys", new_key_entry())
        settings.setdefault("decision_signing_key", f"k1:{new_key_pair()[0]}")
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", **settings)
    return create_app(built, store=world.store, publisher=world.bus), built


@asynccontextmanager
async def client(
    app: FastAPI, ip: str = "203.0.113.7", headers: dict[str, str] | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, client=(ip, 40000))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway", headers=headers or {}
    ) as http:
        yield http


async def owner_key(world: World, role: Role = Role.OWNER) -> str:
    _, secret = await create_key(world.store.api_keys, project_id="p1", role=role, name="t")
    return secret


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["type"].endswith("/" + slug), body
    return body


async def agents(http: httpx.AsyncClient, authorization: str | None = None) -> httpx.Response:
    headers = {"Authorization": authorization} if authorization is not None else {}
    return await http.get(AGENTS, params={"workspace_id": "w1"}, headers=headers)


# --- parsing the credential ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("Bearer ilk_x", "ilk_x"),
        ("bEaReR  ilk_x", "ilk_x"),
        ("BEARER\tilk_x ", "ilk_x"),
        ("  bearer   ilk_x  ", "ilk_x"),
        ("Basic ilk_x", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("Bearerilk_x", None),
        ("", None),
        (None, None),
    ],
)
def test_the_bearer_credential_is_parsed_leniently_and_only_as_bearer(
    value: str | None, secret: str | None
) -> None:
    assert bearer_secret(value) == secret


@pytest.mark.parametrize(
    ("headers", "secret"),
    [
        ({"X-API-Key": "ilk_x"}, "ilk_x"),
        ({"x-api-key": "  ilk_x "}, "ilk_x"),
        ({"X-API-Key": "   "}, None),
        ({"Authorization": "Bearer ilk_a", "X-API-Key": "ilk_b"}, "ilk_a"),
        ({"Authorization": "Basic ilk_a", "X-API-Key": "ilk_b"}, "ilk_b"),
        ({}, None),
    ],
    ids=["header", "spaced", "blank", "bearer-wins", "non-bearer-authorization", "none"],
)
def test_a_key_may_come_as_x_api_key_and_a_bearer_one_wins(
    headers: dict[str, str], secret: str | None
) -> None:
    assert presented_secret(Headers(headers)) == secret


async def test_the_langgraph_clients_x_api_key_authenticates_like_a_bearer_key(
    world: World, monkeypatch: pytest.MonkeyPatch, counted: CountingKeys
) -> None:
    app, _ = gateway(world, monkeypatch, rate_limit_per_second=0.001, rate_limit_burst=3)
    secret = await owner_key(world)
    async with client(app) as http:
        listed = await http.get(
            AGENTS, params={"workspace_id": "w1"}, headers={"X-API-Key": secret}
        )
        assert listed.status_code == 200, listed.text
        assert len(counted.reads) == 1  # read once for the rate limit and the route together
        # Another last character (a secret that ends in "0" stays right with a "0").
        forged = secret[:-1] + ("1" if secret.endswith("0") else "0")
        wrong = await http.get(AGENTS, headers={"X-API-Key": forged})
        problem(wrong, 401, "unauthenticated")
        # One key, one bucket (a burst of 3), whichever header carries it: the X-API-Key request
        # spent the first token (the wrong key's was charged to the address).
        codes = [(await agents(http, f"Bearer {secret}")).status_code for _ in range(3)]
        assert codes == [200, 200, 429]


# --- rate limits that hold ----------------------------------------------------------------------


async def test_a_key_spelled_every_way_spends_one_bucket(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch, rate_limit_per_second=0.001, rate_limit_burst=3)
    secret = await owner_key(world)
    spellings = [f"Bearer {secret}", f"bEaReR  {secret}", f"BEARER\t{secret}", f"bearer {secret}"]
    async with client(app) as http:
        codes = [(await agents(http, value)).status_code for value in spellings]
        assert codes == [200, 200, 200, 429], codes
        limited = await agents(http, f"bEaReR {secret}")
        problem(limited, 429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1
        # The address was never charged: a request without a key still passes (as a 401).
        assert (await agents(http)).status_code == 401


async def test_a_flood_of_bogus_keys_is_charged_to_the_address(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch, rate_limit_per_second=0.001, rate_limit_burst=3)
    good = await owner_key(world)
    revoked = await owner_key(world)
    await world.store.api_keys.revoke("p1", revoked.split("_")[1])
    bogus = [
        f"Bearer ilk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}",
        "Bearer not-a-key",
        f"Bearer {revoked}",
        f"Bearer ilk_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}",
        f"Bearer {good}x",  # a valid id with a wrong secret
    ]
    async with client(app) as http:
        codes = [(await agents(http, value)).status_code for value in bogus]
        assert codes == [401, 401, 401, 429, 429], codes
        problem(await agents(http), 429, "rate-limited")  # no key: the same address
        # A valid key from the flooded address has its own bucket.
        assert (await agents(http, f"Bearer {good}")).status_code == 200
    async with client(app, ip="198.51.100.9") as elsewhere:
        assert (await agents(elsewhere, bogus[0])).status_code == 401


async def test_each_request_reads_its_key_once(
    world: World, monkeypatch: pytest.MonkeyPatch, counted: CountingKeys
) -> None:
    app, _ = gateway(world, monkeypatch)
    secret = await owner_key(world)
    async with client(app) as http:
        assert (await agents(http, f"Bearer {secret}")).status_code == 200
        assert counted.reads == [secret.split("_")[1]]
        assert (await agents(http, "Bearer not-a-key")).status_code == 401
        assert (await agents(http)).status_code == 401
        assert len(counted.reads) == 1  # nothing to read for a malformed or missing key


async def test_a_spoofed_forwarded_for_buys_nothing_without_trusted_proxies(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch, rate_limit_per_second=0.001, rate_limit_burst=2)
    async with client(app) as http:
        codes = [
            (
                await http.get("/openapi.json", headers={"X-Forwarded-For": f"10.9.8.{i}"})
            ).status_code
            for i in range(4)
        ]
    assert codes == [200, 200, 429, 429], codes


async def test_forwarded_for_counts_only_from_a_trusted_proxy(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(
        world,
        monkeypatch,
        rate_limit_per_second=0.001,
        rate_limit_burst=1,
        trusted_proxies="10.0.0.0/24, 192.0.2.1",
    )
    async with client(app, ip="10.0.0.5") as proxy:
        # Each client behind the proxy has its own bucket; one client cannot escape its own by
        # prepending addresses (the right-most untrusted one counts).
        for address in ("198.51.100.1", "198.51.100.2"):
            headers = {"X-Forwarded-For": address}
            assert (await proxy.get("/openapi.json", headers=headers)).status_code == 200
        spoofed = {"X-Forwarded-For": "1.2.3.4, 198.51.100.1"}
        assert (await proxy.get("/openapi.json", headers=spoofed)).status_code == 429
    async with client(app, ip="203.0.113.50") as direct:
        assert (await direct.get("/openapi.json")).status_code == 200
        # Not a trusted proxy: its header is ignored, the peer pays.
        headers = {"X-Forwarded-For": "198.51.100.3"}
        assert (await direct.get("/openapi.json", headers=headers)).status_code == 429


async def test_a_database_that_does_not_answer_is_a_503_at_the_edge_not_a_500(
    world: World, monkeypatch: pytest.MonkeyPatch, counted: CountingKeys
) -> None:
    from pymongo.errors import ServerSelectionTimeoutError

    async def down(key_id: str) -> ApiKey | None:
        raise ServerSelectionTimeoutError("no primary")

    app, _ = gateway(world, monkeypatch)
    secret = await owner_key(world)
    monkeypatch.setattr(counted, "get", down)
    async with client(app) as http:
        response = await agents(http, f"Bearer {secret}")
        problem(response, 503, "service-unavailable")
        assert int(response.headers["retry-after"]) >= 1
        assert (await agents(http)).status_code == 401  # no key: nothing to read


@pytest.mark.parametrize("bad", ["proxy.internal", "10.0.0.0/33", "*"])
def test_trusted_proxies_must_be_addresses_or_networks(bad: str) -> None:
    with pytest.raises(ValidationError, match="TRUSTED_PROXIES"):
        GatewaySettings(trusted_proxies=f"10.0.0.1,{bad}")
    settings = GatewaySettings(trusted_proxies=" 10.0.0.0/8 , ::1 ,")
    assert settings.trusted_proxy_list == ["10.0.0.0/8", "::1"]
    assert GatewaySettings().trusted_proxy_list == []


# --- the development key ------------------------------------------------------------------------


@pytest.mark.parametrize("environment", ["production", "test"])
async def test_the_development_key_is_refused_outside_development_whatever_the_store_holds(
    world: World, monkeypatch: pytest.MonkeyPatch, counted: CountingKeys, environment: str
) -> None:
    await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="dev", secret=DEV_SECRET
    )
    app, _ = gateway(world, monkeypatch, environment=environment)
    with capture_logs() as logs:
        async with app.router.lifespan_context(app), client(app) as http:
            body = problem(await agents(http, f"Bearer {DEV_SECRET}"), 401, "unauthenticated")
            assert "not valid" in body["detail"]
    # Refused by its id: the request never read it (only the start-up check did).
    assert counted.reads == [DEVELOPMENT_KEY_ID]
    [warning] = [e for e in logs if e["event"] == "security.development_key_present"]
    assert warning["log_level"] == "warning"
    assert warning["environment"] == environment
    assert f"keys revoke {DEVELOPMENT_KEY_ID} --project p1" in warning["detail"]


async def test_the_development_key_works_in_development_and_no_warning_is_logged(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="dev", secret=DEV_SECRET
    )
    app, _ = gateway(world, monkeypatch, environment="development")
    with capture_logs() as logs:
        async with app.router.lifespan_context(app), client(app) as http:
            assert (await agents(http, f"Bearer {DEV_SECRET}")).status_code == 200
    assert not [e for e in logs if e["event"] == "security.development_key_present"]


async def test_no_warning_without_the_key_or_once_it_is_revoked(world: World) -> None:
    keys = world.store.api_keys
    with capture_logs() as logs:
        assert not await warn_if_development_key_present(keys, environment="production")
        await create_key(keys, project_id="demo", role=Role.OWNER, name="dev", secret=DEV_SECRET)
        assert await warn_if_development_key_present(keys, environment="production")
        await keys.revoke("demo", DEVELOPMENT_KEY_ID)
        assert not await warn_if_development_key_present(keys, environment="production")
    assert len([e for e in logs if e["event"] == "security.development_key_present"]) == 1
    production = GatewayKeys(keys, environment="production")
    assert await production.get(DEVELOPMENT_KEY_ID) is None
    assert await GatewayKeys(keys, environment="development").get(DEVELOPMENT_KEY_ID) is not None


# --- bodies and routes --------------------------------------------------------------------------


async def test_nan_in_a_resume_body_is_a_400_problem_not_a_500(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch)
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    url = f"/api/v1/projects/p1/executions/{started.execution_id}/resume"
    headers = {"Authorization": f"Bearer {await owner_key(world)}"}
    async with client(app, headers=headers) as http:
        for number in ("NaN", "Infinity", "-Infinity"):
            response = await http.post(
                url,
                params={"workspace_id": "w1"},
                content=f'{{"decision": "approve", "generation": {number}}}'.encode(),
                headers={"content-type": "application/json"},
            )
            problem(response, 400, "json-non-finite-number")
    assert (await world.execution(started.execution_id)).status.value == "suspended"


async def test_the_cancel_route_names_cancel_in_its_403(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch)
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    headers = {"Authorization": f"Bearer {await owner_key(world, Role.MEMBER)}"}
    async with client(app, headers=headers) as http:
        response = await http.post(
            f"/api/v1/projects/p1/executions/{started.execution_id}/cancel",
            params={"workspace_id": "w1"},
        )
    body = problem(response, 403, "forbidden-role")
    assert body["detail"] == "cancel requires PROJECT_OWNER; this key has PROJECT_MEMBER"


# --- /docs and /metrics -------------------------------------------------------------------------


async def test_docs_are_served_from_the_package_with_the_review_page_protections(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch)
    async with client(app) as http:
        page = await http.get("/docs")
        assert page.status_code == 200
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        policy = dict(
            directive.strip().split(" ", 1)
            for directive in page.headers["content-security-policy"].split(";")
        )
        assert policy["frame-ancestors"] == "'none'"
        assert policy["default-src"] == "'self'"
        assert policy["connect-src"] == "'self'"
        # The one inline script (the bundle's start) is admitted by its hash, nothing else.
        [inline] = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert policy["script-src"] == f"'self' 'sha256-{digest}'"
        assert "'unsafe-eval'" not in page.headers["content-security-policy"]
        # Everything it loads comes from this origin.
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/docs/static/") for s in sources), sources
        assert "cdn" not in page.text and "://" not in inline
        assert '"validatorUrl": null' in inline
        for source in sources:
            asset = await http.get(source)
            assert asset.status_code == 200, source
            assert asset.headers["x-content-type-options"] == "nosniff"
        assert len((await http.get("/docs/static/swagger-ui-bundle.js")).content) > 100_000
        assert (await http.get("/redoc")).status_code == 404  # ReDoc came from a CDN: gone
        assert (await http.get("/openapi.json")).status_code == 200


async def test_docs_under_a_root_path_point_at_the_prefixed_assets(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch)
    transport = httpx.ASGITransport(app=app, root_path="/interlock")
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        page = await http.get("/interlock/docs")
    assert page.status_code == 200
    assert "url: '/interlock/openapi.json'" in page.text
    assert 'src="/interlock/docs/static/swagger-ui-bundle.js"' in page.text
