"""Keeps the MongoDB driver's connection pool from clearing itself over and over once the server
came back from a restart (pymongo 4.20, the newest release; docs/reliability.md has the run).

When the server goes away the driver clears its pool and *pauses* it until its monitor sees the
server again; a checkout meanwhile fails with ``AutoReconnect("... connection pool paused")``.
The CMAP specification says that error "MUST be considered a retryable error and MUST NOT be an
error that marks the SDAM state unknown". pymongo hands it to the topology's error handling like
any network error, though, and when the failed checkout carries the pool's current generation
(it began after the last clear) that marks the server unknown and clears the pool again, which
pauses it again. With more operations waiting than the pool has connections (an orchestrator's
consumers, a gateway's requests) some checkout is always failing that way: measured on FerretDB
after one SIGKILL and restart, 250 concurrent callers, the pool was cleared two to three times a
second for as long as the load lasted and served 0 to 4 operations a second instead of 650,
while a process that held fewer callers than connections recovered at once.

``install`` wraps the topology's error handler so that this one error changes nothing (the
operation still fails, and the caller's retry rule retries it); every other error is handled as
the driver handles it. It is recognised by what pymongo raises for it: an ``AutoReconnect``
caused by ``AutoReconnect("connection pool paused")`` (``pool_shared._raise_if_not_ready``).
tests/unit/test_pool_recovery.py pins that shape, so a driver release that changes it fails
there, and tests/contract/test_mongo_pool_recovery.py kills a real FerretDB under load.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from pymongo.asynchronous.topology import Topology
from pymongo.errors import AutoReconnect

PAUSED_POOL_MESSAGE = "connection pool paused"

ErrorHandler = Callable[[Topology, Any, Any], Awaitable[None]]


def is_paused_pool_checkout(error: BaseException | None) -> bool:
    """True for the error a checkout from a paused pool raises, and for nothing else."""
    cause = getattr(error, "__cause__", None)
    return (
        isinstance(error, AutoReconnect)
        and isinstance(cause, AutoReconnect)
        and cause.args == (PAUSED_POOL_MESSAGE,)
    )


def ignoring_paused_pool_checkouts(handle_error: ErrorHandler) -> ErrorHandler:
    @functools.wraps(handle_error)
    async def handle(topology: Topology, address: Any, err_ctx: Any) -> None:
        if is_paused_pool_checkout(err_ctx.error):
            return  # the pool is paused already: nothing to learn about the server from it
        await handle_error(topology, address, err_ctx)

    handle.ignores_paused_pool_checkouts = True  # type: ignore[attr-defined]
    return handle


def install() -> None:
    """Idempotent; every MongoDB client of the process is covered (the store's ``connect``
    calls it before making one)."""
    current = Topology._handle_error
    if not getattr(current, "ignores_paused_pool_checkouts", False):
        Topology._handle_error = ignoring_paused_pool_checkouts(current)  # type: ignore[method-assign,assignment]
