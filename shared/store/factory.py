"""The store a composition root runs on, built from its settings.

The one place that makes a MongoDB client for a process: the four services' ``create_app``,
``interlock dev`` on infrastructure and ``interlock store init`` all call ``mongo_store``, so
they get the same client options (tests/unit/test_store_factory.py checks that none builds its
own):

- ``INTERLOCK_MONGODB_TIMEOUT_MS``: no operation takes longer (it raises, and the caller's retry
  rule sees a transient failure);
- ``INTERLOCK_MONGODB_SLOW_COMMAND_MS``: commands slower than this are logged; every command is
  timed into ``interlock_store_command_seconds`` and every connection counted
  (``shared/store/mongo/watch.py``);
- the connection pool is the driver's (100 connections per server), sized by the URI's own
  options (``?maxPoolSize=...``) wherever it is set: the URI is passed as it is.

``interlock dev``'s embedded mode opens its SQLite file with ``SqliteStore.open`` (a file, no
client options to share).
"""

from __future__ import annotations

from shared.settings import CommonSettings
from shared.store.mongo import MongoStore


def mongo_store(settings: CommonSettings) -> MongoStore:
    """The MongoDB store the settings name; nothing is sent until the first operation."""
    return MongoStore.connect(
        settings.mongodb_uri,
        settings.mongodb_database,
        operation_timeout_ms=settings.mongodb_timeout_ms,
        slow_command_ms=settings.mongodb_slow_command_ms,
        compress_state=settings.store_compression,
    )
