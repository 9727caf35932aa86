"""MongoDB adapter of shared/store/agent_versions.py."""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from shared.domain.descriptions import AgentDescription
from shared.domain.versions import AgentVersion
from shared.events import utc_now

DESCRIPTION = "description"
"""The field of a version's document that holds how its graph looks: a subdocument of JSON
text (shared/domain/descriptions.py says why text). Optional: a release before it never writes
it and reads past it (it keeps only the fields it knows), and this one reads a document without
it as a version never described."""


class MongoAgentVersions:
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._collection = database["agent_versions"]

    async def publish(
        self, version: AgentVersion, description: AgentDescription | None = None
    ) -> None:
        # Last writer wins: replicas of one deployment publish the same thing; during a rolling
        # deploy the newest code is what future resumes will run on.
        # The whole document is replaced, so a load error reported before goes with it, and so
        # does the description of another version: a version and its description are one write.
        document: dict[str, Any] = {**version.model_dump(), "published_at": utc_now()}
        if description is not None:
            document[DESCRIPTION] = description.model_dump()
        try:
            await self._collection.replace_one({"_id": version.agent}, document, upsert=True)
        except DuplicateKeyError:
            # Two replicas starting together both found no document and both inserted; the
            # loser retries, now as an update (MongoDB documents this retry for upserts).
            await self._collection.replace_one({"_id": version.agent}, document, upsert=True)

    async def report_unloadable(self, agent: str, reason: str) -> None:
        # Set beside the version, which stays: one command, and no collection (nor grant) more.
        change = {"$set": {"load_error": reason, "load_error_at": utc_now()}}
        try:
            await self._collection.update_one({"_id": agent}, change, upsert=True)
        except DuplicateKeyError:  # as in publish
            await self._collection.update_one({"_id": agent}, change, upsert=True)

    async def get(self, agent: str) -> AgentVersion | None:
        # Runs and decisions read this: the description stays on the server.
        document = await self._collection.find_one({"_id": agent}, {DESCRIPTION: 0})
        if document is None or "fingerprint" not in document:
            return None  # none, or only a load error: no version of it ever loaded
        # Only the fields stored: one published before a field existed reads with its default.
        fields = {k: document[k] for k in AgentVersion.model_fields if k in document}
        return AgentVersion.model_validate(fields)

    async def description(self, agent: str) -> AgentDescription | None:
        document = await self._collection.find_one({"_id": agent}, {DESCRIPTION: 1})
        if document is None or not isinstance(document.get(DESCRIPTION), dict):
            return None
        return AgentDescription.model_validate(document[DESCRIPTION])

    async def unloadable(self) -> dict[str, str]:
        found = self._collection.find({"load_error": {"$exists": True}}, {"load_error": 1})
        return {document["_id"]: document["load_error"] async for document in found}
