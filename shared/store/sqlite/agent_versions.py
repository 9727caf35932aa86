"""Which version of each agent the sandboxes run now, on SQLite."""

from __future__ import annotations

from shared.domain.descriptions import AgentDescription
from shared.domain.versions import AgentVersion
from shared.events import utc_now
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_versions (
    agent TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    published_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_load_errors (
    agent TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    reported_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_descriptions (
    agent TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    published_at TEXT NOT NULL
);
"""
# Descriptions have a table of their own, as load errors do: a database made by an older release
# gains it on open, that release never reads it, and reading a version never parses one.


class SqliteAgentVersions:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def publish(
        self, version: AgentVersion, description: AgentDescription | None = None
    ) -> None:
        # Last writer wins, as in MongoAgentVersions; an upsert is one statement here, so
        # replicas starting together cannot trip over each other's insert.
        now = utc_now().isoformat()
        await self._db.execute(
            "INSERT INTO agent_versions (agent, body, published_at) VALUES (?, ?, ?)"
            " ON CONFLICT (agent) DO UPDATE SET"
            " body = excluded.body, published_at = excluded.published_at",
            (version.agent, version.model_dump_json(), now),
        )
        if description is None:
            # The description of another version must not outlive it.
            await self._db.execute(
                "DELETE FROM agent_descriptions WHERE agent = ?", (version.agent,)
            )
        else:
            await self._db.execute(
                "INSERT INTO agent_descriptions (agent, body, published_at) VALUES (?, ?, ?)"
                " ON CONFLICT (agent) DO UPDATE SET"
                " body = excluded.body, published_at = excluded.published_at",
                (version.agent, description.model_dump_json(), now),
            )
        await self._db.execute("DELETE FROM agent_load_errors WHERE agent = ?", (version.agent,))

    async def report_unloadable(self, agent: str, reason: str) -> None:
        # A table of its own (not a column): a database made by an older release gains it
        # with CREATE TABLE IF NOT EXISTS, and the version row is kept as it was.
        await self._db.execute(
            "INSERT INTO agent_load_errors (agent, reason, reported_at) VALUES (?, ?, ?)"
            " ON CONFLICT (agent) DO UPDATE SET"
            " reason = excluded.reason, reported_at = excluded.reported_at",
            (agent, reason, utc_now().isoformat()),
        )

    async def get(self, agent: str) -> AgentVersion | None:
        row = await self._db.fetch_one("SELECT body FROM agent_versions WHERE agent = ?", (agent,))
        return AgentVersion.model_validate_json(row["body"]) if row is not None else None

    async def description(self, agent: str) -> AgentDescription | None:
        row = await self._db.fetch_one(
            "SELECT body FROM agent_descriptions WHERE agent = ?", (agent,)
        )
        return AgentDescription.model_validate_json(row["body"]) if row is not None else None

    async def unloadable(self) -> dict[str, str]:
        rows = await self._db.fetch_all("SELECT agent, reason FROM agent_load_errors")
        return {row["agent"]: row["reason"] for row in rows}
