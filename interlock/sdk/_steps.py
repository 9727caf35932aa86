"""Durable steps: side effects in agent code that run once per execution.

LangGraph re-runs an interrupted node from its first line when the execution resumes, and a
crashed attempt re-runs from its last checkpoint, so a side effect before ``interrupt()`` would
repeat. A durable step stores its result under a deterministic key the first time it completes;
when the node runs again the stored result is returned and the function is not called.
docs/durable-steps.md explains the key rules and what breaks them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast, overload

from interlock.sdk._errors import NoStepRun
from interlock.sdk._execute import run_async, run_sync
from interlock.sdk.runtime import CURRENT_KEY, CURRENT_RUN

__all__ = ["current_idempotency_key", "durable_step", "run_step", "run_step_sync"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@overload
def durable_step(fn: F, /) -> F: ...


@overload
def durable_step(*, name: str | None = None) -> Callable[[F], F]: ...


def durable_step(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Make a sync or async function a durable step: ``@durable_step`` or
    ``@durable_step(name="send_email")``. The name (default: the function's qualified name) is
    part of the key; renaming a step re-runs it in executions that already ran it. A function
    with an ``idempotency_key`` parameter gets the step's key in it."""

    def decorate(fn: F) -> F:
        step_name = name or fn.__qualname__
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async_step(*args: Any, **kwargs: Any) -> Any:
                run = CURRENT_RUN.get()
                if run is None:
                    return await fn(*args, **kwargs)
                return await run_async(run, step_name, fn, args, kwargs, None)

            return cast(F, run_async_step)

        @functools.wraps(fn)
        def run_sync_step(*args: Any, **kwargs: Any) -> Any:
            run = CURRENT_RUN.get()
            if run is None:
                return fn(*args, **kwargs)
            return run_sync(run, step_name, fn, args, kwargs, None)

        return cast(F, run_sync_step)

    return decorate(fn) if fn is not None else decorate


@overload
async def run_step(
    name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, key: str | None = None, **kwargs: Any
) -> T: ...


@overload
async def run_step(
    name: str, fn: Callable[..., T], /, *args: Any, key: str | None = None, **kwargs: Any
) -> T: ...


async def run_step(
    name: str, fn: Callable[..., Any], /, *args: Any, key: str | None = None, **kwargs: Any
) -> Any:
    """``await run_step("charge", charge_card, amount, key=...)``: ``fn(*args, **kwargs)`` as a
    durable step. ``fn`` may be async or sync (a sync one runs on the event loop). ``key``
    replaces the derived key (namespaced by the execution id) and works outside nodes too."""
    run = CURRENT_RUN.get()
    if run is None:
        result = fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    return await run_async(run, name, fn, args, kwargs, key)


def run_step_sync(
    name: str, fn: Callable[..., T], /, *args: Any, key: str | None = None, **kwargs: Any
) -> T:
    """``run_step`` for sync code (sync nodes, which LangGraph runs in worker threads)."""
    run = CURRENT_RUN.get()
    if run is None:
        return fn(*args, **kwargs)
    return cast(T, run_sync(run, name, fn, args, kwargs, key))


def current_idempotency_key() -> str:
    """The key of the durable step running now: pass it to the API the step calls, so a step
    that runs again after a crash is recognised by that API as the same request."""
    key = CURRENT_KEY.get()
    if key is None:
        raise NoStepRun("current_idempotency_key() is only available inside a running durable step")
    return key
