"""The SQLite store: every port of shared/store/ports.py on one database file."""

from __future__ import annotations

from pathlib import Path

from shared.store.sqlite import (
    agent_versions,
    api_keys,
    approvals,
    crons,
    erasure,
    executions,
    links,
    memories,
    notifications,
    progress,
    steps,
    threads,
)
from shared.store.sqlite.database import BUSY_TIMEOUT_MS, Database

SCHEMA_VERSION = 1
"""Kept in the file's ``user_version``, for a future migration to know what it reads."""


class SqliteStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        self.executions = executions.SqliteExecutionStore(database)
        self.decisions = executions.SqliteDecisionClaims(database)
        self.steps = steps.SqliteStepStore(database)
        self.attempts = steps.SqliteAttemptLedger(database)
        self.agent_versions = agent_versions.SqliteAgentVersions(database)
        self.api_keys = api_keys.SqliteApiKeys(database)
        self.approvals = approvals.SqliteApprovals(database)
        self.spent_links = links.SqliteSpentLinks(database)
        self.progress = progress.SqliteProgressLog(database)
        self.notifications = notifications.SqliteNotifications(database)
        self.threads = threads.SqliteThreads(database)
        self.memories = memories.SqliteMemories(database)
        self.crons = crons.SqliteCrons(database)
        self.erasure = erasure.SqliteErasure(database)

    @classmethod
    def connect(cls, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> SqliteStore:
        """Create the store; the file is opened by the first operation (like
        ``MongoStore.connect``), and its tables by ``ensure_indexes``."""
        return cls(Database(path, busy_timeout_ms=busy_timeout_ms))

    @classmethod
    async def open(cls, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> SqliteStore:
        """Connect and create the tables."""
        store = cls.connect(path, busy_timeout_ms=busy_timeout_ms)
        await store.ensure_indexes()
        return store

    async def ensure_indexes(self) -> None:
        """Create what is missing of the schema: every service runs this at start-up."""
        await self._db.execute_script(
            "\n".join(
                module.SCHEMA
                for module in (
                    executions,
                    steps,
                    agent_versions,
                    api_keys,
                    approvals,
                    links,
                    progress,
                    notifications,
                    threads,
                    memories,
                    crons,
                    erasure,  # its indexes are on the tables above
                )
            )
            + f"\nPRAGMA user_version = {SCHEMA_VERSION};"
        )
        await self.progress.expire()

    async def ping(self) -> None:
        await self._db.ping()

    async def close(self) -> None:
        await self._db.close()
