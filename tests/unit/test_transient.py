"""The one retry rule: ``is_transient`` says which failures the bus, the gateway and the sandbox
runner retry, over the errors the drivers raise and the ones Interlock raises on purpose."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
)
from pymongo.errors import (
    AutoReconnect,
    ConfigurationError,
    DocumentTooLarge,
    DuplicateKeyError,
    ExecutionTimeout,
    NetworkTimeout,
    NotPrimaryError,
    OperationFailure,
    ServerSelectionTimeoutError,
)

from shared.errors import (
    ConcurrencyConflict,
    Fenced,
    RejectedMessage,
    RetryableError,
    Transient,
    is_transient,
)
from shared.store.errors import StoreUnavailable


@pytest.fixture
def locked_error(tmp_path: Path) -> Iterator[sqlite3.OperationalError]:
    """The error SQLite raises when another connection holds the write lock past the timeout."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="locked") as raised:
            waiter.execute("CREATE TABLE t (x)")
        yield raised.value
    finally:
        holder.close()
        waiter.close()


@pytest.mark.parametrize(
    "error",
    [
        AutoReconnect("connection reset"),
        NetworkTimeout("timed out"),
        ServerSelectionTimeoutError("no servers"),
        NotPrimaryError("not primary"),
        ExecutionTimeout("operation exceeded time limit", code=50),
        OperationFailure("primary stepped down", code=189),
        # FerretDB's answer while its PostgreSQL is unreachable: a code of its own.
        OperationFailure("PostgreSQL connection refused", code=1),
        # A race lost on a unique key the caller did not expect to be taken: re-reading resolves.
        DuplicateKeyError("E11000 duplicate key", code=11000),
        TimeoutError(),
        KafkaConnectionError("broker down"),
        KafkaTimeoutError(),
        NotLeaderForPartitionError(),
        StoreUnavailable("database is busy"),
        Transient("broker did not answer"),
        ConcurrencyConflict("lost a race"),
        RetryableError("sandbox is still starting"),
    ],
    ids=type,
)
def test_failures_that_pass_are_transient(error: BaseException) -> None:
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        OperationFailure("Document failed validation", code=121),
        DocumentTooLarge("BSON document too large"),
        ConfigurationError("bad URI option"),
        MessageSizeTooLargeError(),
        RejectedMessage("bad schema"),
        Fenced("superseded"),
        sqlite3.OperationalError("no such table: executions"),
        sqlite3.IntegrityError("UNIQUE constraint failed"),
        ValueError("the agent's own bug"),
    ],
    ids=type,
)
def test_failures_that_repeat_are_not(error: BaseException) -> None:
    assert not is_transient(error)


def test_a_locked_sqlite_database_is_transient(locked_error: sqlite3.OperationalError) -> None:
    assert is_transient(locked_error)


def test_a_store_unavailable_is_the_one_transient_type() -> None:
    assert issubclass(StoreUnavailable, Transient)
    assert issubclass(Transient, RetryableError)
