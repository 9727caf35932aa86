"""Running a step within a bound :class:`~interlock.sdk.runtime.StepRun`: serve it from the
cache, or call it and store its result (fenced) before returning it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import structlog
from pydantic import TypeAdapter

from interlock.sdk._codec import codec_for, decode, encode
from interlock.sdk._errors import StepError
from interlock.sdk._keys import key_for
from interlock.sdk.runtime import CURRENT_KEY, StepRun
from shared import metrics
from shared.faults import fault_point
from shared.graph_tracing import step_span
from shared.store.ports import StepRecord

__all__ = ["run_async", "run_sync"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

KEY_PARAMETER = "idempotency_key"


def _accepts_key(fn: Callable[..., Any]) -> bool:
    try:
        return KEY_PARAMETER in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature to inspect (some builtins)
        return False


def _arguments(name: str, kwargs: dict[str, Any], key: str, wants_key: bool) -> dict[str, Any]:
    if not wants_key:
        return kwargs
    if KEY_PARAMETER in kwargs:
        raise StepError(
            f"step {name!r}: {KEY_PARAMETER} is supplied by the step; to choose the key, call "
            "run_step(..., key=...)"
        )
    return {**kwargs, KEY_PARAMETER: key}


@contextmanager
def _running(key: str) -> Iterator[None]:
    token = CURRENT_KEY.set(key)
    try:
        yield
    finally:
        CURRENT_KEY.reset(token)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _save(run: StepRun, record: StepRecord) -> StepRecord:
    """Runs on the run's loop: the store and the fence belong to it."""
    fault_point("step.after_effect")
    if run.fence is not None:
        await run.fence()
    stored = await run.store.put(record)
    run.cache[stored.key] = stored
    fault_point("step.after_cache")
    return stored


async def _look_up(run: StepRun, key: str) -> None:
    """Into the cache: the step stored under ``key`` (or its key before task ids were left out)
    by an attempt whose steps the run was not given. One read by ``_id`` per key not known."""
    for candidate in (key, run.legacy.get(key)):
        if candidate is None or candidate in run.cache:
            return
        stored = await run.store.get(candidate)
        if stored is not None:
            run.cache[stored.key] = stored
            return


async def _on_run_loop(run: StepRun, work: Callable[[], Coroutine[Any, Any, T]]) -> T:
    if _running_loop() is run.loop:
        return await work()
    # An async step driven by another loop (asyncio.run in a worker thread): hop over.
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work(), run.loop))


def _record(run: StepRun, key: str, name: str, result: str) -> StepRecord:
    return StepRecord(
        key=key,
        execution_id=run.execution_id,
        name=name,
        result=result,
        epoch=run.epoch,
        attempt=run.attempt,
    )


def _hit(run: StepRun, codec: TypeAdapter[Any], key: str) -> tuple[bool, Any]:
    record = run.cache.get(key)
    if record is None and key in run.legacy:
        record = run.cache.get(run.legacy[key])
    if record is None:
        metrics.STEP_CACHE.labels("miss").inc()
        return False, None
    metrics.STEP_CACHE.labels("hit").inc()
    run.replay(record)
    return True, decode(codec, record)


def _outcome(
    run: StepRun, codec: TypeAdapter[Any], stored: StepRecord, text: str, mine: Any
) -> Any:
    if stored.result == text:
        log.info("step.completed", step=stored.name, key=stored.key, execution_id=run.execution_id)
        return mine
    # Another attempt stored first: its result wins, so the execution follows one lineage.
    log.warning(
        "step.superseded",
        step=stored.name,
        key=stored.key,
        execution_id=run.execution_id,
        stored_epoch=stored.epoch,
        stored_attempt=stored.attempt,
    )
    return decode(codec, stored)


async def run_async(
    run: StepRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str | None,
) -> Any:
    """The step awaited on any loop; its store work runs on the run's loop."""
    # The key is taken before the first await, so concurrent steps started in a fixed order
    # (asyncio.gather) get their ordinals in that order.
    step_key = key_for(run, name, key)
    codec = codec_for(fn, name)
    with step_span(name, step_key) as span:
        if run.read_on_miss:
            await _on_run_loop(run, lambda: _look_up(run, step_key))
        found, value = _hit(run, codec, step_key)
        span.set_attribute("interlock.step.cached", found)
        if found:
            return value
        with _running(step_key):
            result = fn(*args, **_arguments(name, kwargs, step_key, _accepts_key(fn)))
            if inspect.isawaitable(result):
                result = await result
        text, mine = encode(codec, name, result, run.max_result_bytes)
        record = _record(run, step_key, name, text)
        stored = await _on_run_loop(run, lambda: _save(run, record))
        return _outcome(run, codec, stored, text, mine)


def run_sync(
    run: StepRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str | None,
) -> Any:
    """The step called from a worker thread; its store work is sent to the run's loop."""
    # The store is async on run.loop; blocking that loop's own thread on it never returns.
    if _running_loop() is run.loop:
        raise StepError(
            f"sync step {name!r} was called on the event loop's thread (from an async node or "
            "coroutine), where waiting for the store would deadlock; make the step async "
            "(async def, await it) or use `await run_step(...)`"
        )
    if not run.loop.is_running():
        raise StepError(f"step {name!r}: the event loop of this step run is not running")
    step_key = key_for(run, name, key)
    codec = codec_for(fn, name)
    with step_span(name, step_key) as span:
        if run.read_on_miss:
            asyncio.run_coroutine_threadsafe(_look_up(run, step_key), run.loop).result()
        found, value = _hit(run, codec, step_key)
        span.set_attribute("interlock.step.cached", found)
        if found:
            return value
        with _running(step_key):
            result = fn(*args, **_arguments(name, kwargs, step_key, _accepts_key(fn)))
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise StepError(
                f"step {name!r} returned an awaitable; async functions need an async step"
            )
        text, mine = encode(codec, name, result, run.max_result_bytes)
        record = _record(run, step_key, name, text)
        stored = asyncio.run_coroutine_threadsafe(_save(run, record), run.loop).result()
        return _outcome(run, codec, stored, text, mine)
