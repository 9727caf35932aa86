"""The root of Interlock's exceptions. Each error knows whether retrying can help."""

from __future__ import annotations

import sqlite3
import sys
from typing import Any


class InterlockError(Exception):
    """Base of every error Interlock raises on purpose. Each class also says what it means to
    an API client: its RFC 9457 problem (type, title, status), which the gateway's one handler
    renders (services/gateway/problems.py). One that does not say is a 500: a bug."""

    retryable: bool = False
    problem_type: str = "internal-error"
    """The problem type's slug (the document's ``type`` is the problems' base URL and this)."""
    problem_title: str = "Internal error"
    problem_status: int = 500

    def problem_extensions(self) -> dict[str, Any]:
        """Members of the problem document besides type, title, status, detail and instance."""
        return {}


class RetryableError(InterlockError):
    """A dependency (broker, database) failed; the same message may succeed later."""

    retryable = True
    problem_type = "service-unavailable"
    problem_title = "Service unavailable"
    problem_status = 503


class Transient(RetryableError):
    """A dependency (database, broker) failed for a reason that passes: the one error adapters
    wrap their driver's "try again" errors in (``shared.store.errors.StoreUnavailable`` is one).
    """


class RejectedMessage(InterlockError):
    """A message that can never be processed: it goes to the dead-letter topic with ``reason``."""

    retryable = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ConcurrencyConflict(RetryableError):
    """A compare-and-set lost a race; re-reading and re-applying resolves it."""


class Fenced(InterlockError):
    """This attempt was superseded by a newer one (another replica took over): it must stop
    without writing anything more. Not retryable: the newer attempt does the work."""


# MongoDB errors are transient unless they say the request itself is wrong. The other way round
# (a list of "not now" codes) would turn every server failure not on the list into a dead letter,
# and a MongoDB-compatible server has codes of its own: FerretDB answers an unreachable
# PostgreSQL with an internal error, not with a step-down. What a retry cannot fix: a document
# the server refuses (validation, size, type, parse errors) and a client that is misconfigured.
# A duplicate key that reaches a caller (the expected ones are caught where a unique _id is the
# claim) is a lost race, which re-reading resolves, like ConcurrencyConflict.
_MONGO_REFUSED_CODES = frozenset({2, 9, 14, 17, 22, 52, 53, 55, 121, 2170, 10334, 17419, 17420})
_SQLITE_WAITING_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_transient(exc: BaseException) -> bool:
    """Whether the same operation may succeed if tried again: the one retry rule of the bus
    wrapper, the gateway (503 with ``Retry-After``) and the sandbox runner.

    True for Interlock's retryable errors (``Transient`` and what adapters wrapped in it,
    ``ConcurrencyConflict``), timeouts, and the driver errors that adapters wrap or that reach
    the callers unwrapped (LangGraph's checkpointer, the Kafka producer): a MongoDB connection
    failure, timeout or step-down, a busy or locked SQLite file, a retriable Kafka error or a
    Kafka timeout. MongoDB errors are transient unless they refuse the request itself (see
    ``_MONGO_REFUSED_CODES``). False for everything else, such as a rejected message.
    """
    if isinstance(exc, InterlockError):
        return exc.retryable
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        return _is_sqlite_busy(exc)
    return _is_mongo_transient(exc) or _is_kafka_transient(exc)


def _is_sqlite_busy(exc: sqlite3.OperationalError) -> bool:
    # Another connection held the lock past the busy timeout. ``sqlite_errorcode`` is the
    # extended code (e.g. SQLITE_BUSY_SNAPSHOT); its low byte is the primary one.
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "locked" in str(exc) or "busy" in str(exc)
    return code & 0xFF in _SQLITE_WAITING_CODES


# The drivers are looked up, not imported: an instance of a driver's error means its module is
# loaded, and this module stays free of driver imports (the SQLite adapter and agents import it).
def _is_mongo_transient(exc: BaseException) -> bool:
    errors = sys.modules.get("pymongo.errors")
    if errors is None or not isinstance(exc, errors.PyMongoError):
        return False
    refused = (
        errors.ConfigurationError,
        errors.InvalidName,
        errors.InvalidOperation,
        errors.InvalidURI,
        errors.DocumentTooLarge,
    )
    if isinstance(exc, refused):
        return False
    return not (isinstance(exc, errors.OperationFailure) and exc.code in _MONGO_REFUSED_CODES)


def _is_kafka_transient(exc: BaseException) -> bool:
    errors = sys.modules.get("aiokafka.errors")
    if errors is None or not isinstance(exc, errors.KafkaError):
        return False
    # KafkaTimeoutError (the producer gave up waiting for a broker) is not marked retriable.
    return bool(exc.retriable) or isinstance(exc, errors.KafkaTimeoutError)
