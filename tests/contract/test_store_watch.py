"""Every database command is timed per command and collection, and a slow one is logged with
the field names it filtered on, never their values (shared/store/mongo/watch.py), on a real
server."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from pymongo import AsyncMongoClient
from structlog.testing import capture_logs

from shared.store.mongo.watch import CommandWatch, filter_shape
from tests.conftest import unique_name

pytestmark = pytest.mark.integration


def test_the_shape_of_a_filter_is_its_field_names() -> None:
    assert filter_shape({"find": "c", "filter": {"b": 1, "a": {"$gt": 2}}}) == ["a", "b"]
    assert filter_shape({"update": "c", "updates": [{"q": {"_id": "x"}, "u": {}}]}) == ["_id"]
    assert filter_shape({"aggregate": "c", "pipeline": [{"$match": {"status": "x"}}]}) == ["status"]
    assert filter_shape({"insert": "c", "documents": [{"secret": 1}]}) == []


def samples(command: str, collection: str) -> float:
    value = REGISTRY.get_sample_value(
        "interlock_store_command_seconds_count", {"command": command, "collection": collection}
    )
    return value or 0.0


async def test_commands_are_timed_and_slow_ones_logged_without_values(mongodb_uri: str) -> None:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        mongodb_uri, event_listeners=[CommandWatch(slow_ms=0.001)]
    )
    name = unique_name("watch")
    collection = f"watched_{name}"
    try:
        before = samples("find", collection)
        with capture_logs() as logs:
            await client[name][collection].insert_one({"_id": "k", "reviewer": "ada@example.com"})
            await client[name][collection].find_one({"reviewer": "ada@example.com"})
        assert samples("find", collection) == before + 1
        slow = [e for e in logs if e["event"] == "store.slow_command" and e["command"] == "find"]
        assert slow and slow[0]["collection"] == collection
        assert slow[0]["filter_fields"] == ["reviewer"]
        assert "ada@example.com" not in repr(logs)
    finally:
        await client.drop_database(name)
        await client.close()
