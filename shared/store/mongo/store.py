"""The MongoDB store: every port on one database, and its client."""

from __future__ import annotations

from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from shared.store.errors import StoreUnavailable
from shared.store.mongo import pool_recovery
from shared.store.mongo.agent_versions import MongoAgentVersions
from shared.store.mongo.api_keys import MongoApiKeys
from shared.store.mongo.approvals import MongoApprovals
from shared.store.mongo.attempts import MongoAttemptLedger
from shared.store.mongo.crons import MongoCrons
from shared.store.mongo.erasure import MongoErasure
from shared.store.mongo.executions import MongoDecisionClaims, MongoExecutionStore
from shared.store.mongo.links import MongoSpentLinks
from shared.store.mongo.memories import MongoMemories
from shared.store.mongo.notifications import MongoNotifications
from shared.store.mongo.progress import MongoProgressLog
from shared.store.mongo.steps import MongoStepStore
from shared.store.mongo.threads import MongoThreads
from shared.store.mongo.watch import CommandWatch, ConnectionWatch

Document = dict[str, Any]


class MongoStore:
    def __init__(
        self,
        client: AsyncMongoClient[Document],
        database_name: str,
        *,
        compress_state: bool = True,
    ) -> None:
        """``compress_state``: write state-sized values (execution bodies, the sandbox's
        checkpoints) compressed once big enough (shared/store/mongo/compression.py)."""
        self._client = client
        self._database_name = database_name
        self.compress_state = compress_state
        database = client[database_name]
        self.executions = MongoExecutionStore(database, compress=compress_state)
        self.decisions = MongoDecisionClaims(database)
        self.steps = MongoStepStore(database)
        self.attempts = MongoAttemptLedger(database)
        self.agent_versions = MongoAgentVersions(database)
        self.api_keys = MongoApiKeys(database)
        self.approvals = MongoApprovals(database)
        self.spent_links = MongoSpentLinks(database)
        self.progress = MongoProgressLog(database)
        self.notifications = MongoNotifications(database)
        self.threads = MongoThreads(database)
        self.memories = MongoMemories(database)
        self.crons = MongoCrons(database)
        self.erasure = MongoErasure(database)

    @classmethod
    def connect(
        cls,
        uri: str,
        database_name: str,
        *,
        timeout_ms: int = 5_000,
        operation_timeout_ms: int | None = None,
        slow_command_ms: float | None = None,
        compress_state: bool = True,
    ) -> MongoStore:
        """Create the client; nothing is sent until the first operation. With
        ``operation_timeout_ms``, no operation takes longer (it raises a ``PyMongoError``). Every
        command is timed (shared/store/mongo/watch.py); those slower than ``slow_command_ms`` are
        logged. The driver's pool recovers from a server restart under load
        (shared/store/mongo/pool_recovery.py)."""
        pool_recovery.install()
        client: AsyncMongoClient[Document] = AsyncMongoClient(
            uri,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            timeoutMS=operation_timeout_ms,
            tz_aware=True,
            appname="interlock",
            event_listeners=[CommandWatch(slow_command_ms), ConnectionWatch()],
        )
        return cls(client, database_name, compress_state=compress_state)

    @property
    def database(self) -> AsyncDatabase[Document]:
        """The database, for adapters of other ports on the same client (the sandbox's
        LangGraph checkpointer)."""
        return self._client[self._database_name]

    async def ensure_indexes(self) -> None:
        await self.executions.ensure_indexes()
        await self.steps.ensure_indexes()
        await self.attempts.ensure_indexes()
        await self.api_keys.ensure_indexes()
        await self.approvals.ensure_indexes()
        await self.progress.ensure_indexes()
        await self.notifications.ensure_indexes()
        await self.threads.ensure_indexes()
        await self.memories.ensure_indexes()
        await self.crons.ensure_indexes()
        await self.erasure.ensure_indexes()

    async def ping(self) -> None:
        try:
            await self._client.admin.command("ping")
        except PyMongoError as exc:
            raise StoreUnavailable(f"database did not answer: {exc}") from exc

    async def close(self) -> None:
        await self._client.close()
