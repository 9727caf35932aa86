"""A PostgreSQL server for a peer: which one (``INTERLOCK_POSTGRES_URI``, else the one FerretDB
runs on), a fresh database on it for each run, dropped afterwards, and its processes, whose CPU
is reported apart from the peer's (they are shared with FerretDB and anyone else)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench import procstats

SERVER_URI = "INTERLOCK_POSTGRES_URI"
"""The server, as ``postgresql://ROLE@HOST:PORT/DATABASE`` (any database the role may connect
to: new databases are created from it). ``bash infra/infra.sh env`` prints it."""
DATABASE_PREFIX = "bench_dbos_"
CONNECT_TIMEOUT_SECONDS = 5
"""A server that does not answer fails the run within seconds instead of hanging it."""
POSTGRES_SCHEMES = ("postgresql", "postgres")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
HOW_TO_FIX = (
    "start the local one with `bash infra/infra.sh up` (FerretDB's PostgreSQL backend, the"
    f" default), or set {SERVER_URI} to a server where the role may create databases"
)


class Unavailable(RuntimeError):
    """No PostgreSQL server to run on: the message says which and why, and what to do."""


def server_url(mongodb_uri: str | None = None) -> str | None:
    """``INTERLOCK_POSTGRES_URI``, else the ``--postgresql-url`` of the FerretDB serving
    ``mongodb_uri`` on this machine (the server the store runs on), else None."""
    configured = os.environ.get(SERVER_URI)
    if configured:
        return configured
    if not mongodb_uri:
        return None
    ferretdb = procstats.store_pids(mongodb_uri).get(procstats.FERRETDB)
    return None if ferretdb is None else procstats.postgresql_url(ferretdb)


def fresh_database_name() -> str:
    """Lower case, letters, digits and underscores: needs no quoting anywhere."""
    return f"{DATABASE_PREFIX}{uuid.uuid4().hex[:12]}"


def database_url(server: str, database: str) -> str:
    """``server``'s URL naming ``database`` instead, as ``postgresql://`` (SQLAlchemy, which DBOS
    uses, does not know the ``postgres://`` alias); user, password, host and options kept."""
    parts = urlsplit(server)
    if parts.scheme not in POSTGRES_SCHEMES:
        raise ValueError(f"not a PostgreSQL URL: {redacted(server)}")
    return urlunsplit(("postgresql", parts.netloc, f"/{database}", parts.query, ""))


def redacted(url: str) -> str:
    """The URL with its password, if any, hidden (it goes into logs and error messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def server_name(url: str) -> str:
    """The server alone, as the page names it: ``postgresql://ROLE@HOST:PORT``, no password."""
    parts = urlsplit(redacted(database_url(url, "postgres")))
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


async def _connect(server: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    try:
        return await psycopg.AsyncConnection.connect(
            database_url(server, urlsplit(server).path.lstrip("/") or "postgres"),
            autocommit=True,  # CREATE / DROP DATABASE refuse to run in a transaction
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except psycopg.Error as exc:
        raise Unavailable(
            f"cannot reach PostgreSQL at {redacted(server)} ({_first_line(exc)}): {HOW_TO_FIX}"
        ) from exc


def require(server: str | None) -> str:
    """``server``, or ``Unavailable`` when none is known (see ``server_url``)."""
    if not server:
        raise Unavailable(f"no PostgreSQL server is known for the DBOS peer: {HOW_TO_FIX}")
    return server


async def check(server: str) -> str:
    """The server's version, once it is known to answer and to let the role create databases;
    else ``Unavailable`` saying why not."""
    async with await _connect(server) as conn:
        cursor = await conn.execute(
            "SELECT current_setting('server_version'), rolsuper OR rolcreatedb"
            " FROM pg_roles WHERE rolname = current_user"
        )
        row = await cursor.fetchone()
    if row is None or not row[1]:
        raise Unavailable(
            f"the role of {redacted(server)} may not create databases (CREATEDB): {HOW_TO_FIX}"
        )
    return str(row[0])


@asynccontextmanager
async def fresh_database(server: str) -> AsyncIterator[str]:
    """A database of its own on ``server`` for one run, dropped when it ends (and connections
    left to it closed: a peer that failed halfway may still hold some); yields its URL."""
    name = fresh_database_name()
    async with await _connect(server) as conn:
        try:
            await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as exc:
            raise Unavailable(
                f"cannot create a database on {redacted(server)} ({_first_line(exc)}): {HOW_TO_FIX}"
            ) from exc
    try:
        yield database_url(server, name)
    finally:
        async with await _connect(server) as conn:
            await conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def server_pids(server: str) -> dict[str, int]:
    """The postmaster listening on the server's port when it runs here (measured with all its
    backends, as for Interlock's store); empty for a remote server or without permission."""
    parts = urlsplit(database_url(server, "postgres"))
    if (parts.hostname or "localhost") not in LOCAL_HOSTS:
        return {}
    pid = procstats.listener_pid(parts.port or 5432)
    return {} if pid is None else {procstats.POSTGRESQL: pid}
