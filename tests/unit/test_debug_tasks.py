"""``/debug/tasks`` is an operator's tool (issue 31, finding 6): it does not exist unless
``INTERLOCK_DEBUG_TASKS_TOKEN`` is set, then answers only that bearer token, and the task names
it lists say what each task does, never whose (no key or execution ids)."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from shared.health import bearer_matches, health_app, health_server
from shared.settings import CommonSettings
from tests.unit.test_health import DEBUG_AUTHORIZATION, DEBUG_TOKEN

ROOT = Path(__file__).resolve().parents[2]


async def get_tasks(app: object, headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        return await client.get("/debug/tasks", headers=headers or {})


async def test_without_a_token_there_is_no_such_route() -> None:
    app = health_app({})
    assert (await get_tasks(app)).status_code == 404
    assert (await get_tasks(app, DEBUG_AUTHORIZATION)).status_code == 404
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://health") as client:
        assert (await client.get("/healthz")).status_code == 200  # the rest is unchanged
        assert (await client.get("/metrics")).status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer wrong-token-of-the-same-size",
        f"Bearer {DEBUG_TOKEN}x",
        f"Bearer {DEBUG_TOKEN[:-1]}",
        f"Basic {DEBUG_TOKEN}",
        DEBUG_TOKEN,
    ],
)
async def test_a_missing_or_wrong_credential_is_401(authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await get_tasks(health_app({}, debug_tasks_token=DEBUG_TOKEN), headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "---" not in response.text  # no task listed


@pytest.mark.parametrize(
    "authorization", [f"Bearer {DEBUG_TOKEN}", f"bearer  {DEBUG_TOKEN} ", f"BEARER {DEBUG_TOKEN}"]
)
async def test_the_token_opens_it(authorization: str) -> None:
    response = await get_tasks(
        health_app({}, debug_tasks_token=DEBUG_TOKEN), {"Authorization": authorization}
    )
    assert response.status_code == 200
    assert response.text.split("\n", 1)[0].endswith(" tasks")


def test_bearer_matches_only_the_exact_token() -> None:
    assert bearer_matches(f"Bearer {DEBUG_TOKEN}", DEBUG_TOKEN)
    assert not bearer_matches(None, DEBUG_TOKEN)
    assert not bearer_matches("Bearer é", DEBUG_TOKEN)


async def test_the_setting_reaches_the_health_listener(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_DEBUG_TASKS_TOKEN", DEBUG_TOKEN)
    server = health_server(CommonSettings(health_port=0), {}, metrics=CollectorRegistry())
    assert server is not None
    app = server._server.config.app
    assert (await get_tasks(app)).status_code == 401
    assert (await get_tasks(app, DEBUG_AUTHORIZATION)).status_code == 200
    monkeypatch.delenv("INTERLOCK_DEBUG_TASKS_TOKEN")
    server = health_server(CommonSettings(health_port=0), {}, metrics=CollectorRegistry())
    assert server is not None
    assert (await get_tasks(server._server.config.app, DEBUG_AUTHORIZATION)).status_code == 404


def test_a_short_token_is_refused_at_start_up() -> None:
    with pytest.raises(ValidationError, match="debug_tasks_token"):
        CommonSettings(debug_tasks_token="short")


def _task_names() -> list[tuple[str, ast.expr]]:
    """Every ``name=`` given to ``create_task`` in the services, ``shared`` and ``interlock``."""
    found: list[tuple[str, ast.expr]] = []
    for folder in ("services", "shared", "interlock"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                called = node.func
                name = called.attr if isinstance(called, ast.Attribute) else None
                if name not in {"create_task", "set_name"}:
                    continue
                values = [k.value for k in node.keywords if k.arg == "name"]
                if name == "set_name":
                    values += node.args
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.extend((where, value) for value in values)
    return found


def test_no_task_is_named_after_an_id() -> None:
    names = _task_names()
    assert names, "the scan finds the named tasks"
    for where, value in names:
        for part in ast.walk(value):
            if isinstance(part, ast.Attribute | ast.Name):
                spelled = part.attr if isinstance(part, ast.Attribute) else part.id
                assert not spelled.lower().endswith(("id", "ids", "key", "secret")), (
                    f"{where}: a task named after {spelled}: /debug/tasks lists task names"
                )
