"""The paused-pool fix (shared/store/mongo/pool_recovery.py): it recognises exactly the error a
checkout from a paused pool raises in the installed driver, drops only that one before the
topology's error handling, and is installed by the store."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from pymongo.asynchronous.pool import Pool, PoolOptions
from pymongo.asynchronous.topology import Topology
from pymongo.errors import AutoReconnect, NetworkTimeout, WaitQueueTimeoutError
from pymongo.pool_shared import _raise_connection_failure

from shared.store.mongo import MongoStore, pool_recovery


def _raised(call: Any) -> BaseException:
    try:
        call()
    except BaseException as error:
        return error
    raise AssertionError("nothing was raised")


def test_the_drivers_paused_pool_checkout_error_is_recognised() -> None:
    # A pool starts paused until the monitor first sees its server: checking it is what every
    # checkout does first, and raises what a checkout during a clear raises.
    pool = Pool(("127.0.0.1", 1), PoolOptions(), is_sdam=False)
    error = _raised(lambda: pool._raise_if_not_ready(time.monotonic(), emit_event=False))

    assert isinstance(error, AutoReconnect)
    assert pool_recovery.is_paused_pool_checkout(error)


@pytest.mark.parametrize(
    "cause",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
        AutoReconnect("connection closed"),
    ],
)
def test_network_errors_are_not_mistaken_for_it(cause: Exception) -> None:
    error = _raised(lambda: _raise_connection_failure(("127.0.0.1", 1), cause))

    assert isinstance(error, (AutoReconnect, NetworkTimeout))
    assert not pool_recovery.is_paused_pool_checkout(error)


def test_nor_are_errors_that_only_say_the_words() -> None:
    assert not pool_recovery.is_paused_pool_checkout(AutoReconnect("connection pool paused"))
    assert not pool_recovery.is_paused_pool_checkout(WaitQueueTimeoutError("pool paused"))
    assert not pool_recovery.is_paused_pool_checkout(None)


async def test_only_the_paused_pool_checkout_skips_the_topologys_error_handling() -> None:
    handled: list[BaseException] = []

    async def driver_handling(topology: Any, address: Any, err_ctx: Any) -> None:
        handled.append(err_ctx.error)

    handle = pool_recovery.ignoring_paused_pool_checkouts(driver_handling)
    pool = Pool(("127.0.0.1", 1), PoolOptions(), is_sdam=False)
    paused = _raised(lambda: pool._raise_if_not_ready(time.monotonic(), emit_event=False))
    reset = _raised(
        lambda: _raise_connection_failure(("127.0.0.1", 1), ConnectionResetError(104, "reset"))
    )

    await handle(None, ("127.0.0.1", 1), SimpleNamespace(error=paused))  # type: ignore[arg-type]
    await handle(None, ("127.0.0.1", 1), SimpleNamespace(error=reset))  # type: ignore[arg-type]

    assert handled == [reset]


async def test_the_store_installs_it_once() -> None:
    first = MongoStore.connect("mongodb://127.0.0.1:1/?directConnection=true", "unused")
    installed = Topology._handle_error
    second = MongoStore.connect("mongodb://127.0.0.1:1/?directConnection=true", "unused")
    pool_recovery.install()
    await first.close()
    await second.close()

    assert getattr(installed, "ignores_paused_pool_checkouts", False)
    assert Topology._handle_error is installed
