from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from shared.store.memory import InMemoryStore
from shared.store.mongo import MongoStore
from shared.store.ports import Store
from shared.store.sqlite import SqliteStore
from tests import infra


@pytest.fixture(scope="session")
def mongodb_uri() -> Iterator[str]:
    with infra.mongodb_uri() as uri:
        yield uri


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    with infra.kafka_bootstrap() as servers:
        yield servers


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.integration)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """Every storage contract test runs against the fake and both real adapters."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        tmp_path = request.getfixturevalue("tmp_path")
        sqlite = await SqliteStore.open(tmp_path / "interlock.db")
        try:
            yield sqlite
        finally:
            await sqlite.close()
        return
    async with throwaway_mongo_store(request.getfixturevalue("mongodb_uri"), "contract") as mongo:
        yield mongo


@asynccontextmanager
async def throwaway_mongo_store(uri: str, prefix: str) -> AsyncIterator[MongoStore]:
    """A MongoDB store on a database of its own, with its indexes, dropped afterwards."""
    mongo = MongoStore.connect(uri, unique_name(prefix))
    await mongo.ensure_indexes()
    try:
        yield mongo
    finally:
        await mongo._client.drop_database(mongo._database_name)
        await mongo.close()


LONGEST_FIRST = (
    "tests/bench/test_bench_smoke.py",
    "tests/e2e/test_api_fuzz.py",
    "tests/e2e/test_replay.py",
    "tests/chaos/test_chaos.py",
    "tests/quickstart/test_readme_quickstart.py",
    "tests/e2e/test_scaling.py",
    "tests/e2e/test_review_page.py",
    "tests/e2e/test_store_commands.py",
)
"""The test files that take longest (``--durations``), handed out first when ``make test`` runs
files on several workers (``scripts/test.sh``): a long file started last would run alone at the
end while the other workers idle."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's tests keep their order
