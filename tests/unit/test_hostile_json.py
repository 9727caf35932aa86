"""JSON that Python reads but no answer, store or log can hold (issue 31): a number out of range
(``1e400`` is read as infinity, a 30-digit integer fits no store) or a lone surrogate
(``"\\ud800"`` is a ``str`` UTF-8 cannot encode) is a 400 problem before any route runs, on
every route of the gateway, the LangGraph API's included; and a problem document renders
whatever a validation error carries, so a refusal is never a 500 of its own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

from services.gateway.bodies import json_object
from services.gateway.limits import json_violation
from services.gateway.problems import (
    PROBLEM_JSON,
    TYPE_BASE,
    Problem,
    install_problem_handlers,
    json_safe,
    problem_at,
)
from services.gateway.schemas import ResumeRequest
from tests.unit.inprocess import World
from tests.unit.test_gateway_edge_auth import client, gateway, owner_key

LIMITS = {"max_depth": 32, "max_string": 100_000}


def violation(text: str | bytes) -> str | None:
    return json_violation(text.encode() if isinstance(text, str) else text, **LIMITS)


# --- numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"generation": 1e400}',
        '{"generation": -1e400}',
        '{"limit": 1E+400}',
        "[2e308]",
        "[1.5e999999]",
        '{"a": [1, {"b": 0.1e310}]}',
        "[" + "9" * 400 + ".5]",
        "[" + "1" * 310 + "e0]",
        "[9223372036854775808]",
        "[-9223372036854775809]",
        '{"metadata": {"n": 100000000000000000000000000000}}',
        "[" + "7" * 5000 + "]",
    ],
)
def test_numbers_out_of_range_are_refused(text: str) -> None:
    assert violation(text) == "json-number-out-of-range"


@pytest.mark.parametrize(
    "text",
    [
        "[1e308, -1.7976931348623157e308, 1e-400, -1e-999]",
        "[9223372036854775807, -9223372036854775808, 0, -0, 1.0]",
        '{"n": 0.' + "1" * 400 + "}",
        '{"exp": 1e0000000000000000000001, "f": 12345678901234567890.5}',
        '{"as text": "1e400", "and": "' + "9" * 400 + '", "key 1e400": true}',
        '["\\\\u1e400", "\\"1e400"]',
    ],
)
def test_numbers_in_range_and_digits_in_strings_pass(text: str) -> None:
    assert violation(text) is None
    json.loads(text)  # and they are JSON


# --- surrogates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"decision": "\\ud800"}',
        '{"decision": "\\uD800"}',
        '{"decision": "\\udfff"}',
        '{"metadata": {"\\ud800": 1}}',
        '["\\ud83d"]',
        '["before \\ud83d after"]',
        '["\\ud800\\ud800\\udc00"]',
        '["\\ud800\\udc00\\udc00"]',
        '["\\ud800", "\\udc00"]',
        '["\\\\\\ud800"]',
    ],
)
def test_unpaired_surrogates_are_refused(text: str) -> None:
    assert violation(text) == "json-unpaired-surrogate"
    assert violation(text.encode("utf-16")) == "json-unpaired-surrogate"


@pytest.mark.parametrize(
    "text",
    [
        '["\\ud83d\\ude00", "\\uD83D\\uDE00", "\\udbff\\udfff"]',
        '["\\\\ud800", "\\\\\\\\ud800"]',
        '["\\u00e9\\u20ac", "é €", "😀"]',
    ],
)
def test_pairs_escaped_backslashes_and_characters_pass(text: str) -> None:
    assert violation(text) is None
    json.loads(text).__str__().encode()  # each is a string UTF-8 can encode


def test_the_checks_stay_linear_on_a_body_of_suspect_numbers() -> None:
    wide = ("[" + "1e100," * 170_000 + "1]").encode()
    assert violation(wide) is None
    assert violation(wide[:-2] + b"1e400]") == "json-number-out-of-range"


# --- the problem renderer -----------------------------------------------------------------------


def test_a_problem_renders_lone_surrogates_and_non_finite_floats_as_text() -> None:
    response = problem_at(
        "/x",
        400,
        "invalid-request",
        "Invalid request",
        "metadata.\ud800: bad",
        errors=[{"loc": ("metadata", "\ud800"), "ctx": {"le": float("inf"), "e": ValueError("v")}}],
        values=[float("nan"), -float("inf"), 1.5, None, True, 7],
    )
    assert response.media_type == PROBLEM_JSON
    body = json.loads(bytes(response.body))
    assert body["detail"] == "metadata.\\ud800: bad"
    assert body["errors"] == [{"loc": ["metadata", "\\ud800"], "ctx": {"le": "inf", "e": "v"}}]
    assert body["values"] == ["nan", "-inf", 1.5, None, True, 7]


def test_json_safe_leaves_what_json_holds_unchanged() -> None:
    value = {"a": [1, 2.5, "é😀", None, False], "b": {"c": "text"}}
    assert json_safe(value) == value
    assert json_safe({1: "x"}) == {"1": "x"}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    limit: int
    name: Literal["x"]


@pytest.mark.parametrize(
    "raw",
    [
        {"limit": float("inf"), "name": "x"},
        {"limit": -float("inf"), "name": "x"},
        {"limit": 1, "name": "\ud800"},
        {"limit": 1, "name": "x", "\ud800": 1},
        {"limit": float("nan"), "name": b"\xff"},
    ],
)
def test_a_validation_error_of_any_input_renders_without_echoing_it(raw: dict[str, Any]) -> None:
    """What reaches a route's validation without the scan (a caller of ``json_object`` other
    than a body) still answers its 400: the errors name where and what, never the input."""
    with pytest.raises(Problem) as raised:
        json_object(raw, Strict, required=True)
    problem = raised.value
    response = problem_at("/x", 400, "invalid-request", "Invalid request", str(problem))
    assert json.loads(bytes(response.body))["status"] == 400
    errors = problem.problem_extensions()["errors"]
    assert all("input" not in error for error in errors)
    rendered = problem_at("/x", 400, "invalid-request", "Invalid request", "d", errors=errors)
    assert json.loads(bytes(rendered.body))["errors"][0]["msg"]


@pytest.fixture
async def raising_app() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/resume/{which}")
    async def resume(which: str) -> None:
        raw = {"decision": "\ud800"} if which == "surrogate" else {"generation": float("inf")}
        json_object(raw, ResumeRequest, required=True)

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


@pytest.mark.parametrize("which", ["surrogate", "infinity"])
async def test_the_handler_renders_those_validation_errors_as_400(
    raising_app: httpx.AsyncClient, which: str
) -> None:
    response = await raising_app.get(f"/resume/{which}")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.json()["type"] == TYPE_BASE + "invalid-request"


# --- every route of the gateway -----------------------------------------------------------------

HOSTILE = {
    "json-number-out-of-range": ["1e400", "-1e400"],
    "json-unpaired-surrogate": ['"\\ud800"'],
}
"""The values, as JSON text, and the problem each is answered with."""


def bodies_of(value: str) -> list[bytes]:
    """The value alone, as every field of a body a route might read, and deep inside one."""
    fields = (
        "generation",
        "decision",
        "reviewer_notes",
        "limit",
        "offset",
        "metadata",
        "input",
        "message",
        "agent",
    )
    flat = "{" + ", ".join(f'"{name}": {value}' for name in fields) + "}"
    return [
        value.encode(),
        flat.encode(),
        f'{{"assistant_id": "refund-approval", "command": {{"resume": {value}}}}}'.encode(),
        f'{{"metadata": {{"note": {value}, "deep": [[{{"x": {value}}}]]}}}}'.encode(),
    ]


def body_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every operation of the served API that takes a JSON body, its path's ids filled in."""
    spec = app.openapi()
    routes = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if method in {"post", "put", "patch"}:
                filled = path
                for parameter in operation.get("parameters", []):
                    if parameter["in"] == "path":
                        filled = filled.replace("{" + parameter["name"] + "}", "x1")
                routes.append((method, filled.replace("{", "").replace("}", "")))
    return routes


async def test_every_body_route_answers_400_to_out_of_range_numbers_and_lone_surrogates(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, _ = gateway(world, monkeypatch, rate_limit_burst=10_000)
    routes = body_routes(app)
    assert any(path.startswith("/langgraph/") for _, path in routes), routes
    assert any(path.endswith("/resume") for _, path in routes), routes
    secret = await owner_key(world)
    async with client(app, headers={"Authorization": f"Bearer {secret}"}) as http:
        for method, path in routes:
            for slug, values in HOSTILE.items():
                for value in values:
                    for body in bodies_of(value):
                        response = await http.request(
                            method,
                            path,
                            params={"workspace_id": "w1"},
                            content=body,
                            headers={"content-type": "application/json"},
                        )
                        where = f"{method.upper()} {path} {body[:80]!r}"
                        assert response.status_code == 400, f"{where}: {response.text}"
                        assert response.headers["content-type"] == PROBLEM_JSON, where
                        assert response.json()["type"] == TYPE_BASE + slug, where


@pytest.mark.parametrize(
    "query",
    [
        b"workspace_id=w1&limit=1e400",
        b"workspace_id=w1&limit=-1e400",
        b"workspace_id=w1&limit=" + b"9" * 400,
        b"workspace_id=%ED%A0%80",
        b"workspace_id=w1&status=%ED%A0%80",
        b"workspace_id=w1&cursor=%ED%A0%80%ED%B0%80",
    ],
)
async def test_query_parameters_carry_neither_and_are_refused_as_400(
    world: World, monkeypatch: pytest.MonkeyPatch, query: bytes
) -> None:
    """A query string is percent-decoded as UTF-8 with replacement (a surrogate's bytes become
    U+FFFD, never a lone surrogate) and no route reads a float from it: what these become is an
    ordinary invalid parameter."""
    app, _ = gateway(world, monkeypatch)
    secret = await owner_key(world)
    async with client(app, headers={"Authorization": f"Bearer {secret}"}) as http:
        response = await http.get(f"/api/v1/projects/p1/executions?{query.decode()}")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM_JSON


async def test_headers_that_reach_validation_render_their_refusal(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Header values are read as Latin-1, so no byte makes a lone surrogate; one too long is an
    ordinary 400 whatever its bytes."""
    app, _ = gateway(world, monkeypatch)
    secret = await owner_key(world)
    headers = {"Authorization": f"Bearer {secret}", "content-type": "application/json"}
    body = b'{"agent": "refund-approval", "message": "m"}'
    async with client(app, headers=headers) as http:
        response = await http.post(
            "/api/v1/projects/p1/workspaces/w1/invoke",
            content=body,
            headers=[(b"Idempotency-Key", b"\xed\xa0\x80" * 100)],
        )
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
