"""One error model (issue 22): every error the gateway raises on purpose is an InterlockError that
carries its HTTP problem, and the one handler renders any of them, a new one included, with no
mapping of its own."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pymongo.errors import ServerSelectionTimeoutError

from services.gateway.problems import PROBLEM_JSON, TYPE_BASE, install_problem_handlers
from shared.domain.decisions import DecisionNotAllowed
from shared.errors import InterlockError, RetryableError

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = ROOT / "shared" / "domain"
RAISING = sorted(
    [
        *(ROOT / "services" / "gateway").glob("*.py"),
        *(DOMAIN / f"{name}.py" for name in ("decisions", "principals", "cancellation", "review")),
    ]
)
"""The gateway's modules and the domain rules it runs behind its routes."""

NOT_ANSWERED = {
    "services.gateway.limits._TooLarge": "caught in the middleware, which answers 413 itself",
    "services.gateway.limits._Disconnected": "the client is gone: nobody to answer",
    "services.gateway.stream.StreamEnded": "not an error: a stream's 204 (the client has all)",
    "shared.domain.review.ReviewError": "resolve_decision turns it into an InvalidDecision",
    "shared.domain.review.DecisionNotInList": "resolve_decision turns it into one too",
}
"""Exceptions raised there that never reach a client as such, and why."""


def raised_classes() -> Iterator[tuple[str, type[BaseException]]]:
    """Every exception class a ``raise Name(...)`` in those modules names."""
    for path in RAISING:
        module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(module_name)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                continue
            called = node.exc.func
            if not isinstance(called, ast.Name):
                continue
            found = getattr(module, called.id, None)
            if inspect.isclass(found) and issubclass(found, BaseException):
                yield f"{module_name}:{node.lineno}", found


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_the_scan_finds_the_gateways_refusals() -> None:
    found = {cls.__name__ for _, cls in raised_classes()}
    for name in ("UnknownAgent", "ExecutionNotFound", "DecisionConflict", "AlreadyFinished"):
        assert name in found


def test_every_error_the_gateway_raises_carries_its_problem() -> None:
    for where, cls in raised_classes():
        if cls.__name__ == "Problem" or qualified(cls) in NOT_ANSWERED:
            continue  # Problem is given its problem where it is raised
        if not issubclass(cls, Exception):
            continue
        if cls in (ValueError, TypeError, AssertionError, NotImplementedError):
            continue  # a bug or a caught parse failure, never a refusal
        assert issubclass(cls, InterlockError), f"{where}: {qualified(cls)} is no InterlockError"
        assert cls.problem_type != InterlockError.problem_type, f"{where}: {cls.__name__} type"
        assert cls.problem_title and cls.problem_title != InterlockError.problem_title, where
        assert 400 <= cls.problem_status < 500, f"{where}: {cls.__name__} {cls.problem_status}"


class Novel(InterlockError):
    """A refusal no handler has heard of."""

    problem_type = "novel-refusal"
    problem_title = "Novel refusal"
    problem_status = 422

    def problem_extensions(self) -> dict[str, Any]:
        return {"hint": "try the other thing"}


class NarrowerNotAllowed(DecisionNotAllowed):
    """A subclass of a domain error inherits its problem."""


class Unexplained(InterlockError):
    """An Interlock error that says nothing of its problem: a bug, a 500."""


ERRORS: dict[str, Exception] = {
    "novel": Novel("the detail"),
    "narrower": NarrowerNotAllowed("maybe", ["approve", "reject"]),
    "unexplained": Unexplained("a secret internal detail"),
    "retryable": RetryableError("broker gone"),
    "driver": ServerSelectionTimeoutError("no primary"),
    "bug": KeyError("boom"),
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/raise/{name}")
    async def raising(name: str) -> None:
        raise ERRORS[name]

    # A handler for Exception answers, then Starlette re-raises for the server to log.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        yield http


async def test_a_new_subclass_is_rendered_from_its_own_attributes(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/raise/novel")
    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.json() == {
        "type": TYPE_BASE + "novel-refusal",
        "title": "Novel refusal",
        "status": 422,
        "detail": "the detail",
        "instance": "/raise/novel",
        "hint": "try the other thing",
    }


async def test_a_subclass_of_a_domain_error_answers_as_its_parent(
    client: httpx.AsyncClient,
) -> None:
    body = (await client.get("/raise/narrower")).json()
    assert body["status"] == 400 and body["type"] == TYPE_BASE + "decision-not-allowed"
    assert body["allowed_decisions"] == ["approve", "reject"]


async def test_an_error_without_a_problem_is_a_500_that_says_nothing(
    client: httpx.AsyncClient,
) -> None:
    for name in ("unexplained", "bug"):
        response = await client.get(f"/raise/{name}")
        assert response.status_code == 500
        body = response.json()
        assert body["type"] == TYPE_BASE + "internal-error"
        assert "secret" not in body["detail"] and "boom" not in body["detail"]


async def test_a_dependency_that_failed_is_a_503_with_retry_after(
    client: httpx.AsyncClient,
) -> None:
    for name in ("retryable", "driver"):
        response = await client.get(f"/raise/{name}")
        assert response.status_code == 503
        assert response.headers["retry-after"] == "5"
        assert response.json()["type"] == TYPE_BASE + "service-unavailable"


def test_a_client_gone_mid_stream_is_not_a_server_error() -> None:
    import anyio

    from services.gateway.problems import client_gone

    # What an SSE response raises when its client closed the stream during a send.
    assert client_gone(ExceptionGroup("unhandled errors", [anyio.BrokenResourceError()]))
    assert client_gone(anyio.ClosedResourceError())
    assert not client_gone(ExceptionGroup("mixed", [anyio.BrokenResourceError(), ValueError()]))
    assert not client_gone(RuntimeError("a bug"))
