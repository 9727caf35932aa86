"""Every composition root gets its MongoDB client from one factory (``shared/store/factory.py``),
so the operation timeout and the command watching cannot drift apart between processes."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from services.gateway import app as gateway
from services.notifier import app as notifier
from services.orchestrator import app as orchestrator
from services.sandbox import app as sandbox
from shared.settings import CommonSettings
from shared.store import factory
from shared.store.mongo import MongoStore
from shared.store.mongo import store as mongo_module
from shared.store.mongo.watch import CommandWatch, ConnectionWatch

ROOT = Path(__file__).resolve().parents[2]
COMPOSITION_ROOTS = [
    "services/gateway/app.py",
    "services/orchestrator/app.py",
    "services/sandbox/app.py",
    "services/notifier/app.py",
    "interlock/dev.py",
    "interlock/cli.py",
]
OWN_CLIENTS = {
    "shared/store/factory.py": "the factory itself",
    "interlock/key_store.py": "`interlock keys` on a profile's database, with the profile's"
    " timeout: a client command, not a process that serves",
}


def calls(path: Path, name: str, *, on: str | None = None) -> list[int]:
    """Lines of ``path`` that call ``name(...)``, or ``on.name(...)`` when ``on`` is given."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute):
            target = func.value.id if isinstance(func.value, ast.Name) else None
            called = func.attr
        else:
            target, called = None, getattr(func, "id", None)
        if called == name and target == on:
            found.append(node.lineno)
    return found


def product_modules() -> list[Path]:
    return [p for top in ("services", "shared", "interlock") for p in (ROOT / top).rglob("*.py")]


def test_only_the_factory_builds_a_mongodb_store() -> None:
    connecting = {
        str(p.relative_to(ROOT)) for p in product_modules() if calls(p, "connect", on="MongoStore")
    }
    assert connecting <= set(OWN_CLIENTS), connecting - set(OWN_CLIENTS)
    for path in COMPOSITION_ROOTS:
        assert calls(ROOT / path, "mongo_store"), f"{path} does not build its store by the factory"


def test_only_the_mongodb_store_makes_a_client() -> None:
    clients = {
        str(p.relative_to(ROOT))
        for p in product_modules()
        if calls(p, "AsyncMongoClient") or calls(p, "MongoClient")
    }
    assert clients == {"shared/store/mongo/store.py"}


def test_the_factory_passes_the_settings_timeout_and_slow_command_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[dict[str, Any]] = []

    def client(uri: str, **options: Any) -> object:
        made.append({"uri": uri, **options})
        return _Client()

    monkeypatch.setattr(mongo_module, "AsyncMongoClient", client)
    settings = CommonSettings(
        mongodb_uri="mongodb://db.example:27017/?maxPoolSize=7",
        mongodb_database="d",
        mongodb_timeout_ms=1234,
        mongodb_slow_command_ms=50,
    )
    factory.mongo_store(settings)
    (options,) = made
    assert options["uri"] == settings.mongodb_uri  # the pool options in it too
    assert options["timeoutMS"] == 1234
    watches = options["event_listeners"]
    assert {type(w) for w in watches} == {CommandWatch, ConnectionWatch}
    (command_watch,) = [w for w in watches if isinstance(w, CommandWatch)]
    assert command_watch._slow_ms == 50


def test_the_four_services_get_the_same_client_options(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Any, ...]] = []

    def connect(uri: str, database: str, **options: Any) -> MongoStore:
        made.append((uri, database, options))
        return MongoStore(_Client(), database)  # type: ignore[arg-type]

    monkeypatch.setattr(MongoStore, "connect", connect)
    for app_module in (gateway, orchestrator, sandbox, notifier):
        # Process-wide set-up that other tests' log captures depend on: not done here.
        monkeypatch.setattr(app_module, "configure_logging", lambda *_, **__: None)
        monkeypatch.setattr(app_module, "configure_tracing", lambda *_: None)
    common = {
        "mongodb_timeout_ms": 4321,
        "mongodb_slow_command_ms": 25.0,
        "store_compression": False,
    }
    gateway.create_app(gateway.GatewaySettings(**common))
    orchestrator.create_app(orchestrator.OrchestratorSettings(**common))
    sandbox.create_app(sandbox.SandboxSettings(**common))
    notifier.create_app(notifier.NotifierSettings(**common))
    assert len(made) == 4
    assert len(set(map(repr, made))) == 1, made
    assert made[0][2] == {
        "operation_timeout_ms": 4321,
        "slow_command_ms": 25.0,
        "compress_state": False,
    }


class _Client:
    """Enough of a client for a store that is built and never used."""

    def __getitem__(self, name: str) -> _Client:
        return self

    def __getattr__(self, name: str) -> _Client:
        return self
