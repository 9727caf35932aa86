"""API keys on SQLite: the whole key (with its secret's hash, never the secret) as JSON."""

from __future__ import annotations

from shared.events import utc_now
from shared.store.api_keys import ApiKey
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS api_keys_by_project ON api_keys (project_id);
"""


class SqliteApiKeys:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, key: ApiKey) -> None:
        # A concurrent add of the same key stored it first (two gateways creating the dev key).
        await self._db.execute(
            "INSERT INTO api_keys (key_id, project_id, body) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (key.key_id, key.project_id, key.model_dump_json()),
        )

    async def get(self, key_id: str) -> ApiKey | None:
        row = await self._db.fetch_one("SELECT body FROM api_keys WHERE key_id = ?", (key_id,))
        return ApiKey.model_validate_json(row["body"]) if row is not None else None

    async def list(self, project_id: str) -> list[ApiKey]:
        rows = await self._db.fetch_all(
            "SELECT body FROM api_keys WHERE project_id = ? ORDER BY rowid", (project_id,)
        )
        # Sorted on the parsed time, as the in-memory store does: the JSON text of a time does
        # not sort like the time across UTC offsets. Ties keep the order of insertion.
        return sorted(
            (ApiKey.model_validate_json(row["body"]) for row in rows), key=lambda k: k.created_at
        )

    async def revoke(self, project_id: str, key_id: str) -> bool:
        # One statement, so a key is revoked once and its first revocation time stays.
        revoked = await self._db.execute(
            "UPDATE api_keys SET body = json_set(body, '$.revoked_at', ?)"
            " WHERE key_id = ? AND project_id = ? AND json_extract(body, '$.revoked_at') IS NULL",
            (utc_now().isoformat(), key_id, project_id),
        )
        if revoked:
            return True
        row = await self._db.fetch_one(
            "SELECT 1 FROM api_keys WHERE key_id = ? AND project_id = ?", (key_id, project_id)
        )
        return row is not None
