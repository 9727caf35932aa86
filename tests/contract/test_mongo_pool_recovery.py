"""A process with more store operations in flight than its MongoDB pool has connections (an
orchestrator's consumers, a gateway's requests) serves again once a killed FerretDB is back,
instead of clearing its pool over and over (shared/store/mongo/pool_recovery.py).

Without the fix this test fails: measured with the same load, the driver cleared its pool two to
three times a second for as long as the load lasted and served a few operations a second."""

from __future__ import annotations

import asyncio
import random

import pytest
from pymongo.errors import PyMongoError

from shared.metrics import STORE_CONNECTIONS
from shared.store.mongo import MongoStore
from tests.chaos.private_infra import PrivateInfra
from tests.eventually import eventually

pytestmark = pytest.mark.integration

CALLERS = 250
"""Operations in flight at once: well over the driver's 100 connections, so callers queue for
one, as an orchestrator's do under a backlog."""

CLEAN_RUN = 2_000
"""Operations served one after another with no pool clear between them: what "recovered" means."""


class Load:
    def __init__(self, store: MongoStore) -> None:
        self.store = store
        self.served = 0
        self.failed = 0
        self.served_by: set[int] = set()
        self.running = True

    async def caller(self, number: int) -> None:
        scratch = self.store.database["pool_recovery"]
        round_ = 0
        while self.running:
            round_ += 1
            try:
                await self.store.executions.get("proj", f"exec-{number}")
                await scratch.find_one_and_replace(
                    {"_id": f"{number}:{round_ % 20}"}, {"round": round_}, upsert=True
                )
            except PyMongoError:
                self.failed += 1
                await asyncio.sleep(0.2 + random.random() * 0.2)  # the consumers' retry pace
                continue
            self.served += 1
            self.served_by.add(number)


def pool_clears() -> float:
    return STORE_CONNECTIONS.labels("pool_cleared", "")._value.get()


async def test_the_pool_serves_again_after_the_server_is_killed_under_load(
    mongodb_uri: str, tmp_path: object
) -> None:
    # mongodb_uri: infra.sh is up, so the FerretDB binary and PostgreSQL this needs are there.
    infra = PrivateInfra(tmp_path)  # type: ignore[arg-type]
    await infra.start(kafka=False)
    store = MongoStore.connect(
        infra.mongodb_uri, "pool_recovery", timeout_ms=5_000, operation_timeout_ms=10_000
    )
    load = Load(store)
    callers = [asyncio.create_task(load.caller(n)) for n in range(CALLERS)]
    try:

        async def served() -> int:
            return load.served

        await eventually(served, lambda n: n >= CLEAN_RUN, timeout=60, what="the load served")

        infra.kill_ferretdb()
        failed_before = load.failed
        await asyncio.sleep(2)
        await infra.start_ferretdb()
        load.served_by.clear()

        mark = {"clears": pool_clears(), "served": load.served}

        async def clean_run() -> int:
            if pool_clears() != mark["clears"]:  # a clear restarts the count
                mark.update(clears=pool_clears(), served=load.served)
            return load.served - int(mark["served"])

        await eventually(
            clean_run,
            lambda served: served >= CLEAN_RUN and len(load.served_by) == CALLERS,
            timeout=45,
            interval=0.2,
            what=f"{CLEAN_RUN} operations in a row with no pool clear, every caller served",
        )
        assert load.failed > failed_before  # the kill did reach the callers
    finally:
        # Stopped by a flag, not cancelled: each caller ends after its operation in flight (at
        # most the operation timeout), so the client closes with nothing running on it.
        load.running = False
        _, still_running = await asyncio.wait(callers, timeout=60)
        for caller in still_running:
            caller.cancel()
        await store.close()
        await infra.stop()
    assert not still_running, f"{len(still_running)} callers still in an operation after 60 s"
