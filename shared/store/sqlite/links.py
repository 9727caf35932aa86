"""Spent notification links on SQLite: one row per link used, inserted once."""

from __future__ import annotations

from shared.store.links import LinkUse
from shared.store.sqlite.database import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS spent_links (
    link_id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
"""


class SqliteSpentLinks:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def spend(self, use: LinkUse) -> bool:
        inserted = await self._db.execute(
            "INSERT INTO spent_links (link_id, body) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (use.link_id, use.model_dump_json()),
        )
        return inserted == 1

    async def spent(self, link_id: str) -> bool:
        row = await self._db.fetch_one("SELECT 1 FROM spent_links WHERE link_id = ?", (link_id,))
        return row is not None
