"""What the HTTP API refuses before anything starts (issue 21): empty or blank input, idempotency
keys that disagree, bodies that are not JSON or not UTF-8, unknown agents, and paths that match
no route, each a problem document of its own type. Built with ``create_app`` on the in-memory
store and a bus with no consumers: nothing runs, and nothing is stored unless accepted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.store.api_keys import Role, create_key
from shared.store.memory import InMemoryStore
from tests.direct_bus import DirectBus

PROBLEM = "application/problem+json"
INVOKE = "/api/v1/projects/p1/workspaces/w1/invoke"
VALID = {"agent": "refund-approval", "message": "Refund order 1042, it arrived broken"}


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
async def http(store: InMemoryStore, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(settings, store=store, publisher=DirectBus())
    _, secret = await create_key(store.api_keys, project_id="p1", role=Role.OWNER, name="t")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {secret}"},
    ) as client:
        yield client


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["type"] == f"https://interlock.dev/problems/{slug}", body
    assert body["status"] == status and body["title"] and body["detail"]
    return body


async def nothing_started(store: InMemoryStore) -> bool:
    page = await store.executions.list("p1", "w1", status=None, limit=10, cursor=None)
    return not page.items


# --- empty and blank input ----------------------------------------------------------------------


async def test_an_empty_messages_list_is_refused_and_starts_nothing(
    http: httpx.AsyncClient, store: InMemoryStore
) -> None:
    body = problem(
        await http.post(INVOKE, json={"agent": "refund-approval", "messages": []}),
        400,
        "empty-messages",
    )
    assert "'messages' is empty" in body["detail"]
    assert await nothing_started(store)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"message": "   "}, "'message'"),
        ({"message": ""}, "'message'"),
        ({"message": "\n\t "}, "'message'"),
        ({"messages": [{"content": " "}]}, "'messages[0].content'"),
        (
            {"messages": [{"content": "Refund order 1042"}, {"role": "user", "content": "\n"}]},
            "'messages[1].content'",
        ),
    ],
)
async def test_a_blank_message_is_refused_naming_the_field(
    http: httpx.AsyncClient, store: InMemoryStore, payload: dict[str, Any], field: str
) -> None:
    response = await http.post(INVOKE, json={"agent": "refund-approval", **payload})
    body = problem(response, 400, "blank-message")
    assert body["title"] == "Blank message"
    assert body["detail"].startswith(f"{field} is blank"), body
    assert await nothing_started(store)


async def test_a_conversation_with_text_is_accepted(http: httpx.AsyncClient) -> None:
    conversation = [{"role": "system", "content": "Be brief"}, {"content": "Refund 1042"}]
    response = await http.post(INVOKE, json={"agent": "refund-approval", "messages": conversation})
    assert response.status_code == 202, response.text


# --- idempotency keys ---------------------------------------------------------------------------


async def test_an_idempotency_key_header_that_disagrees_with_the_body_is_refused(
    http: httpx.AsyncClient, store: InMemoryStore
) -> None:
    response = await http.post(
        INVOKE, json={**VALID, "idempotency_key": "order-1042"}, headers={"Idempotency-Key": "x"}
    )
    body = problem(response, 400, "idempotency-key-mismatch")
    assert "'x'" in body["detail"] and "'order-1042'" in body["detail"]
    assert await nothing_started(store)


async def test_idempotency_keys_that_agree_or_come_alone_are_accepted(
    http: httpx.AsyncClient,
) -> None:
    both = await http.post(
        INVOKE,
        json={**VALID, "idempotency_key": "order-1042"},
        headers={"Idempotency-Key": "order-1042"},
    )
    assert both.status_code == 202, both.text
    in_body = await http.post(INVOKE, json={**VALID, "idempotency_key": "order-1042"})
    in_header = await http.post(INVOKE, json=VALID, headers={"Idempotency-Key": "order-1042"})
    # One key, however it was sent: one execution.
    assert {r.json()["execution_id"] for r in (both, in_body, in_header)} == {
        both.json()["execution_id"]
    }


async def test_an_empty_idempotency_key_header_is_refused(http: httpx.AsyncClient) -> None:
    problem(
        await http.post(INVOKE, json=VALID, headers={"Idempotency-Key": ""}), 400, "invalid-request"
    )


# --- media types and encodings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "content"),
    [
        ("text/plain", b'{"agent": "refund-approval", "message": "hi"}'),
        ("application/x-www-form-urlencoded", b"agent=refund-approval&message=hi"),
        ("multipart/form-data; boundary=x", b"--x--"),
        ("application/xml", b"<invoke/>"),
        (None, b'{"agent": "refund-approval", "message": "hi"}'),
    ],
)
async def test_a_body_that_is_not_declared_json_is_415(
    http: httpx.AsyncClient, content_type: str | None, content: bytes
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    body = problem(
        await http.post(INVOKE, content=content, headers=headers), 415, "unsupported-media-type"
    )
    assert "Content-Type: application/json" in body["detail"]


async def test_the_other_json_routes_refuse_other_media_types_too(http: httpx.AsyncClient) -> None:
    execution = "/api/v1/projects/p1/executions/e1"
    for route in ("resume", "cancel"):
        response = await http.post(
            f"{execution}/{route}",
            params={"workspace_id": "w1"},
            content=b"decision=approve",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        problem(response, 415, "unsupported-media-type")
    # No body, no media type to get wrong: the route answers (here: no such execution).
    bare = await http.post(f"{execution}/cancel", params={"workspace_id": "w1"})
    problem(bare, 404, "execution-not-found")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.interlock+json",
    ],
)
async def test_json_media_types_are_accepted(http: httpx.AsyncClient, content_type: str) -> None:
    response = await http.post(
        INVOKE,
        content=b'{"agent": "refund-approval", "message": "Refund order 1042"}',
        headers={"content-type": content_type},
    )
    assert response.status_code == 202, response.text


async def test_invalid_utf8_is_a_400_of_its_own(http: httpx.AsyncClient) -> None:
    content = b'{"agent": "refund-approval", "message": "caf\xe9"}'
    response = await http.post(
        INVOKE, content=content, headers={"content-type": "application/json"}
    )
    body = problem(response, 400, "invalid-utf8")
    assert body["title"] == "Body is not valid UTF-8"
    assert "0xe9" in body["detail"] and f"offset {content.index(0xE9)}" in body["detail"]


async def test_malformed_json_is_a_400_of_its_own(http: httpx.AsyncClient) -> None:
    response = await http.post(
        INVOKE, content=b'{"agent": "refund-approval"', headers={"content-type": "application/json"}
    )
    body = problem(response, 400, "invalid-json")
    assert body["title"] == "Body is not valid JSON"
    assert "not valid JSON" in body["detail"] and "character" in body["detail"]


# --- unknown agents -----------------------------------------------------------------------------


async def test_an_unknown_agent_is_a_400_listing_the_registered_ones(
    http: httpx.AsyncClient, store: InMemoryStore
) -> None:
    response = await http.post(INVOKE, json={"agent": "no-such-agent", "message": "hi"})
    body = problem(response, 400, "unknown-agent")
    assert "refund-approval" in body["agents"]
    assert "'no-such-agent'" in body["detail"]
    assert await nothing_started(store)


# --- paths that match no route ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/projects/demo/executions/a%20b%2Fc",
        "/api/v1/projects/demo/executions/a/b/c",
        "/api/v1/nothing-here",
    ],
)
async def test_a_path_that_matches_no_route_says_what_was_not_found(
    http: httpx.AsyncClient, path: str
) -> None:
    body = problem(await http.get(path, params={"workspace_id": "w1"}), 404, "not-found")
    assert body["title"] == "Not found"
    assert f"GET {path}:" in body["detail"], body
    assert "no route" in body["detail"]


async def test_an_encoded_slash_in_an_id_is_explained(http: httpx.AsyncClient) -> None:
    body = problem(await http.get("/api/v1/projects/demo/executions/a%2Fb"), 404, "not-found")
    assert "%2F" in body["detail"] and "'/'" in body["detail"]


async def test_a_wrong_method_names_the_allowed_ones(http: httpx.AsyncClient) -> None:
    response = await http.delete("/api/v1/projects/p1/executions")
    body = problem(response, 405, "method-not-allowed")
    assert body["detail"] == "DELETE is not allowed on /api/v1/projects/p1/executions; allowed: GET"
    assert response.headers["allow"] == "GET"
