"""An agent's description beside its version on a real MongoDB-compatible server, across a
rolling upgrade: the release before reads a version document that holds a description as it
read one before (it keeps only the fields it knows), and this release reads the release
before's document, which has none, as an agent not described."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from shared.domain.descriptions import AgentDescription
from shared.domain.versions import AgentVersion
from shared.store.mongo import MongoStore
from tests.conftest import throwaway_mongo_store

pytestmark = pytest.mark.integration

VERSION = AgentVersion(agent="drawn", fingerprint="fp-1", input_keys=["messages"])
DESCRIBED = AgentDescription(
    graphs=['{"nodes": [{"id": "__start__"}], "edges": []}'],
    schemas=json.dumps({"input_schema": {"$defs": {"x.y": {}}, "$ref": "#/$defs/x.y"}}),
)


@pytest.fixture
async def store(mongodb_uri: str) -> AsyncIterator[MongoStore]:
    async with throwaway_mongo_store(mongodb_uri, "descriptions") as mongo:
        yield mongo


async def test_the_release_before_reads_a_described_version_as_before(store: MongoStore) -> None:
    await store.agent_versions.publish(VERSION, DESCRIBED)
    raw = await store.database["agent_versions"].find_one({"_id": "drawn"})
    assert raw is not None and isinstance(raw["description"]["schemas"], str)
    # How MongoAgentVersions.get read a version before descriptions existed.
    before = AgentVersion.model_validate({k: raw[k] for k in AgentVersion.model_fields if k in raw})
    assert before == VERSION


async def test_a_version_the_release_before_published_reads_as_not_described(
    store: MongoStore,
) -> None:
    await store.agent_versions.publish(VERSION, DESCRIBED)
    # The release before replaced the whole document with the version alone.
    await store.database["agent_versions"].replace_one(
        {"_id": "drawn"}, {**VERSION.model_dump(), "fingerprint": "fp-old"}
    )
    assert await store.agent_versions.description("drawn") is None
    stored = await store.agent_versions.get("drawn")
    assert stored is not None and stored.fingerprint == "fp-old"
