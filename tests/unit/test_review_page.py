"""The gateway serves the Pending Reviews page: the HTML with its security headers, the assets
with types a browser accepts for module scripts and stylesheets, the sign-in defaults (the
development project in development, nothing elsewhere, never a key), and ``/`` sends people
there. The page itself is driven in Chromium by tests/e2e/test_review_page.py."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr

from services.gateway import app as gateway_app
from services.gateway.app import DEV_PROJECT, GatewaySettings, create_app
from services.gateway.web import STATIC_DIR, SignInDefaults, install_review_page
from shared.senders import new_key_pair
from shared.store.memory import InMemoryStore


class NoBroker:
    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        raise AssertionError("serving the page publishes nothing")

    def add_listener(self, topic: str, listener: object) -> None:
        """Nothing is ever heard: these tests open no execution stream."""


DEV_KEY = "ilk_00000000000000de_a-development-key-the-page-must-never-show-00"


def _serve(monkeypatch: pytest.MonkeyPatch, settings: GatewaySettings) -> TestClient:
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    return TestClient(create_app(settings, store=InMemoryStore(), publisher=NoBroker()))


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    with _serve(monkeypatch, GatewaySettings(environment="test")) as test_client:
        yield test_client


@pytest.fixture
def dev_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """A gateway as ``interlock dev`` runs it: development, with the development key."""
    settings = GatewaySettings(environment="development", dev_api_key=DEV_KEY)
    with _serve(monkeypatch, settings) as test_client:
        yield test_client


def test_the_page_is_html_with_a_strict_content_security_policy(client: TestClient) -> None:
    response = client.get("/reviews")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    policy = response.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"  # no 'unsafe-inline': no inline script runs
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "<title>Pending Reviews" in response.text
    # The policy forbids inline script, handlers and style attributes: the page uses none.
    assert not re.search(r"<script(?![^>]*\bsrc=)", response.text)
    assert not re.search(r"<[^>]*\s(on[a-z]+|style)\s*=", response.text)


@pytest.mark.parametrize(
    ("asset", "content_type"),
    [
        ("app.js", "text/javascript"),
        ("api.js", "text/javascript"),
        ("watch.js", "text/javascript"),
        ("sse.js", "text/javascript"),
        ("review-form.js", "text/javascript"),
        ("review-window.js", "text/javascript"),
        ("view.js", "text/javascript"),
        ("visible.js", "text/javascript"),
        ("summary.js", "text/javascript"),
        ("outcome.js", "text/javascript"),
        ("app.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_assets_are_served_with_their_types(
    client: TestClient, asset: str, content_type: str
) -> None:
    response = client.get(f"/reviews/static/{asset}")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == content_type
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.content == (STATIC_DIR / asset).read_bytes()


def test_every_module_the_page_imports_is_served(client: TestClient) -> None:
    """A renamed module would only show as a blank page in a browser: follow the imports."""
    page = client.get("/reviews").text
    pending = re.findall(r'src="/reviews/static/([\w.-]+\.js)"', page)
    seen: set[str] = set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        response = client.get(f"/reviews/static/{module}")
        assert response.status_code == 200, module
        pending += re.findall(r'from "\./([\w.-]+\.js)"', response.text)
    assert seen == {p.name for p in STATIC_DIR.glob("*.js")}


def test_files_outside_the_static_folder_are_not_served(client: TestClient) -> None:
    for path in ("/reviews/static/missing.js", "/reviews/static/%2e%2e/__init__.py"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"


def test_the_root_redirects_to_the_page(client: TestClient) -> None:
    response = client.get("/", follow_redirects=False)
    assert response.status_code == 307
    assert response.headers["location"] == "/reviews"


def test_the_page_is_not_part_of_the_api_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p == "/" or p.startswith("/reviews")]


def test_an_existing_root_route_is_left_alone() -> None:
    app = FastAPI()

    @app.get("/")
    async def home() -> dict[str, str]:
        return {"home": "mine"}

    install_review_page(app)
    with TestClient(app) as test_client:
        assert test_client.get("/").json() == {"home": "mine"}
        assert test_client.get("/reviews").status_code == 200


def test_in_development_the_sign_in_form_is_offered_the_development_project(
    dev_client: TestClient,
) -> None:
    response = dev_client.get("/reviews/config")
    assert response.status_code == 200
    assert response.json() == {"project": DEV_PROJECT, "workspace": "default"}
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-content-type-options"] == "nosniff"
    # The key it names works there: the development key owns that project.
    reviews = dev_client.get(
        f"/api/v1/projects/{DEV_PROJECT}/executions",
        params={"workspace_id": "default"},
        headers={"Authorization": f"Bearer {DEV_KEY}"},
    )
    assert reviews.status_code == 200, reviews.text


@pytest.mark.parametrize("environment", ["test", "production"])
def test_elsewhere_the_sign_in_form_starts_empty(
    monkeypatch: pytest.MonkeyPatch, environment: str
) -> None:
    # Production requires its own encryption and decision keys, as an operator would give them.
    key = "k1:" + base64.b64encode(bytes(32)).decode()
    production = environment == "production"
    settings = GatewaySettings(
        environment=environment,
        encryption_keys=SecretStr(key) if production else None,
        decision_signing_key=SecretStr(f"k1:{new_key_pair()[0]}") if production else None,
    )
    with _serve(monkeypatch, settings) as client:
        assert client.get("/reviews/config").json() == {}
        page = client.get("/reviews").text
    for field in ("api-key", "project", "workspace"):
        tag = re.search(rf"<input id=\"{field}\"[^>]*>", page)
        assert tag is not None, field
        assert "value=" not in tag.group(0), f"#{field} is pre-filled: {tag.group(0)}"


def test_no_key_reaches_the_page_in_development(dev_client: TestClient) -> None:
    """Anyone who can load the page can read what it is served: the key is typed, never sent."""
    served = [dev_client.get("/reviews"), dev_client.get("/reviews/config")]
    served += [dev_client.get(f"/reviews/static/{p.name}") for p in STATIC_DIR.iterdir()]
    for response in served:
        assert response.status_code == 200, response.url
        assert DEV_KEY not in response.text, response.url
        assert "development-key" not in response.text, response.url
        assert "ilk_" not in response.text, response.url


def test_sign_in_defaults_are_names_only() -> None:
    app = FastAPI()
    install_review_page(app, sign_in=SignInDefaults("proj-a", "ws-b"))
    with TestClient(app) as test_client:
        assert test_client.get("/reviews/config").json() == {
            "project": "proj-a",
            "workspace": "ws-b",
        }
