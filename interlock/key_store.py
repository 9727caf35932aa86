"""Which store ``interlock keys`` reads and writes: the one the running Interlock reads.

In order: the MongoDB of ``INTERLOCK_MONGODB_URI`` when it is set; else the ``[store]`` of the
profile (interlock/client/config.py chooses it: the Interlock running in this folder writes one,
interlock/profile.py); else the default MongoDB settings. ``choose`` is the pure part;
``opened`` connects, with ``INTERLOCK_MONGODB_TIMEOUT_MS`` bounding every wait, and turns any
failure into a ``KeyStoreError`` whose message is one line saying what to do.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from pymongo.errors import (
    ConfigurationError,
    ExecutionTimeout,
    NetworkTimeout,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from interlock.client.config import Profile
from shared.store.api_keys import ApiKeys
from shared.store.errors import StoreUnavailable

TIMEOUTS = (ServerSelectionTimeoutError, NetworkTimeout, ExecutionTimeout)


class KeyStoreError(Exception):
    """The key store could not be used; the message says why and what to do, in one line."""


@dataclass(frozen=True)
class SqliteTarget:
    path: Path
    source: str

    def describe(self) -> str:
        return f"the SQLite store {self.path} (from {self.source})"


@dataclass(frozen=True)
class MongoTarget:
    uri: str
    database: str
    timeout_ms: int
    source: str

    def describe(self) -> str:
        return f"MongoDB {redact(self.uri)} database {self.database} (from {self.source})"


Target = SqliteTarget | MongoTarget


@dataclass(frozen=True)
class MongoDefaults:
    """The MongoDB settings of the environment (``CommonSettings``)."""

    uri: str
    database: str
    timeout_ms: int


def choose(env: Mapping[str, str], profile: Profile, mongodb: MongoDefaults) -> Target:
    if env.get("INTERLOCK_MONGODB_URI"):
        source = "INTERLOCK_MONGODB_URI"
        return MongoTarget(mongodb.uri, mongodb.database, mongodb.timeout_ms, source)
    store = profile.values.get("store")
    if isinstance(store, dict):
        if store.get("sqlite"):
            return SqliteTarget(Path(str(store["sqlite"])), profile.source)
        if store.get("mongodb_uri"):
            return MongoTarget(
                str(store["mongodb_uri"]),
                str(store.get("mongodb_database") or mongodb.database),
                mongodb.timeout_ms,
                profile.source,
            )
    return MongoTarget(mongodb.uri, mongodb.database, mongodb.timeout_ms, "the default settings")


def redact(uri: str) -> str:
    """``uri`` without its password, to be printed."""
    return re.sub(r"(//[^:@/]+:)[^@/]*@", r"\1***@", uri)


@asynccontextmanager
async def opened(target: Target) -> AsyncIterator[ApiKeys]:
    """The keys of ``target``; any failure to reach or use it raises ``KeyStoreError``."""
    if isinstance(target, SqliteTarget):
        async with _sqlite(target) as keys:
            yield keys
    else:
        async with _mongodb(target) as keys:
            yield keys


@asynccontextmanager
async def _sqlite(target: SqliteTarget) -> AsyncIterator[ApiKeys]:
    from shared.store.sqlite import SqliteStore

    if not target.path.is_file():
        # Opening it would create an empty store no running Interlock reads.
        raise KeyStoreError(
            f"{target.describe()} does not exist: is that `interlock dev` still running?"
        )
    try:
        store = await SqliteStore.open(target.path)
    except (sqlite3.Error, StoreUnavailable, OSError) as exc:
        raise KeyStoreError(f"cannot open {target.describe()}: {_first_line(exc)}") from exc
    try:
        yield store.api_keys
    except (sqlite3.Error, StoreUnavailable) as exc:
        raise KeyStoreError(f"{target.describe()} failed: {_first_line(exc)}") from exc
    finally:
        await store.close()


@asynccontextmanager
async def _mongodb(target: MongoTarget) -> AsyncIterator[ApiKeys]:
    from shared.store.mongo import MongoStore

    try:
        store = MongoStore.connect(
            target.uri,
            target.database,
            timeout_ms=target.timeout_ms,
            operation_timeout_ms=target.timeout_ms,
        )
    except PyMongoError as exc:
        raise KeyStoreError(_mongodb_failure(target, exc)) from exc
    try:
        await store.api_keys.ensure_indexes()
        yield store.api_keys
    except (PyMongoError, StoreUnavailable) as exc:
        raise KeyStoreError(_mongodb_failure(target, exc)) from exc
    finally:
        await store.close()


def _mongodb_failure(target: MongoTarget, exc: Exception) -> str:
    if isinstance(exc, TIMEOUTS):
        what = f"did not answer within {target.timeout_ms / 1000:g} s"
    elif isinstance(exc, ConfigurationError):
        what = f"is not a usable URI ({_first_line(exc)})"
    elif isinstance(exc, OperationFailure):
        what = f"refused the operation ({_first_line(exc)})"
    else:
        what = f"failed ({_first_line(exc)})"
    return f"{target.describe()} {what}. {_hint(target)}"


def _hint(target: MongoTarget) -> str:
    if target.source == "INTERLOCK_MONGODB_URI":
        return (
            "Check INTERLOCK_MONGODB_URI (and INTERLOCK_MONGODB_TIMEOUT_MS), or unset it to use"
            " the Interlock running in this folder."
        )
    if target.source == "the default settings":
        return (
            "No Interlock runs in this folder (no .interlock/profile.toml of a live process):"
            " run this where `interlock dev` or `interlock up` runs, or set"
            " INTERLOCK_MONGODB_URI to the database Interlock uses."
        )
    return "Is the Interlock that wrote that profile still running?"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."
