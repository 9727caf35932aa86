"""Durable steps: side effects in agent code that run once per execution.

LangGraph re-runs an interrupted node from its first line when the execution resumes, and a
crashed attempt re-runs from its last checkpoint, so a side effect before ``interrupt()`` would
repeat. A durable step stores its result under a deterministic key the first time it completes;
when the node runs again the stored result is returned and the function is not called.

The sandbox opens a :class:`StepRun` per graph run (one load of the execution's steps) and binds
it with :func:`step_run`. Agent code uses :func:`durable_step`, :func:`run_step` or
:func:`run_step_sync`. With no StepRun bound (agent code outside Interlock, plain tests) steps
are ordinary calls. docs/durable-steps.md explains the key rules and what breaks them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import json
import threading
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast, overload

import structlog
from langgraph.config import get_config
from langgraph.runtime import get_runtime
from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic_core import PydanticSerializationError, PydanticSerializationUnexpectedValue

from shared import metrics
from shared.errors import InterlockError
from shared.faults import fault_point
from shared.graph_tracing import step_span
from shared.store.ports import StepRecord, StepStore

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "NoStepRun",
    "StepError",
    "StepResultTooLarge",
    "StepRun",
    "current_idempotency_key",
    "derived_key",
    "durable_step",
    "explicit_key",
    "node_position",
    "run_step",
    "run_step_sync",
    "step_run",
]

log = structlog.get_logger(__name__)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
Fence = Callable[[], Awaitable[None]]

DEFAULT_MAX_RESULT_BYTES = 1_000_000
KEY_PARAMETER = "idempotency_key"
KEY_HASH_CHARS = 24
REPLAYED_LOGGED = 20
"""How many of a run's replayed steps its ``steps.replayed`` line lists (all are counted)."""


class StepError(InterlockError):
    """A durable step was used in a way that cannot be made durable."""


class StepResultTooLarge(StepError):
    """A step's encoded result exceeds the run's budget; nothing was stored."""


class NoStepRun(StepError):
    """No step identity here: outside a LangGraph node without ``key=``, or
    ``current_idempotency_key()`` outside a running step."""


@dataclass(eq=False)
class StepRun:
    """The step cache of one agent run (one dispatch attempt): built by the sandbox."""

    execution_id: str
    epoch: int
    attempt: int
    store: StepStore
    cache: dict[str, StepRecord]
    loop: asyncio.AbstractEventLoop
    """The sandbox's event loop: the store is async and bound to it."""
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    fence: Fence | None = None
    """Awaited before every cache write; raises if this attempt was superseded."""
    read_on_miss: bool = False
    """``cache`` may lack steps that are stored (an earlier attempt of this epoch crashed before
    its checkpoint): look a step up by its key before running it."""
    # Sync nodes of one superstep run in parallel worker threads, hence the lock.
    _ordinals: dict[tuple[str, str, int, str], int] = field(
        default_factory=dict, init=False, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    legacy: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    """A step's key -> the key it had before keys left LangGraph's task ids out."""
    replayed: list[StepRecord] = field(default_factory=list, init=False, repr=False)
    """The steps this run served from the cache, in order: logged once when the run ends (one
    line per step would cost more than serving the step)."""

    @classmethod
    async def open(
        cls,
        *,
        execution_id: str,
        epoch: int,
        attempt: int,
        store: StepStore,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        fence: Fence | None = None,
        known: dict[str, StepRecord] | None = None,
        read_on_miss: bool = False,
    ) -> StepRun:
        """A run of the execution's steps on the running loop: ``known`` are the steps its
        checkpoint lists (nothing read); without it all of them are loaded (one query)."""
        return cls(
            execution_id=execution_id,
            epoch=epoch,
            attempt=attempt,
            store=store,
            cache=dict(known) if known is not None else await store.load(execution_id),
            loop=asyncio.get_running_loop(),
            max_result_bytes=max_result_bytes,
            fence=fence,
            read_on_miss=read_on_miss,
        )

    def remember_legacy(self, key: str, legacy: str) -> None:
        with self._lock:
            self.legacy[key] = legacy

    def next_ordinal(self, scope: tuple[str, str, int, str]) -> int:
        """How many steps of this scope were called before in this run (0, 1, 2, ...)."""
        with self._lock:
            ordinal = self._ordinals.get(scope, 0)
            self._ordinals[scope] = ordinal + 1
        return ordinal


_current_run: contextvars.ContextVar[StepRun | None] = contextvars.ContextVar(
    "interlock_step_run", default=None
)
_current_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "interlock_step_key", default=None
)


@contextmanager
def step_run(run: StepRun) -> Iterator[StepRun]:
    """Bind ``run`` for the duration of a graph run. LangGraph copies the context into the
    tasks and worker threads that run nodes, so steps anywhere in the graph find it."""
    token = _current_run.set(run)
    try:
        yield run
    finally:
        _current_run.reset(token)
        if run.replayed:
            log.info(
                "steps.replayed",
                execution_id=run.execution_id,
                count=len(run.replayed),
                steps=[
                    {
                        "step": r.name,
                        "key": r.key,
                        "stored_epoch": r.epoch,
                        "stored_attempt": r.attempt,
                    }
                    for r in run.replayed[:REPLAYED_LOGGED]
                ],
            )


def current_idempotency_key() -> str:
    """The key of the durable step running now: pass it to the API the step calls."""
    key = _current_key.get()
    if key is None:
        raise NoStepRun("current_idempotency_key() is only available inside a running durable step")
    return key


# --- keys (pure) ------------------------------------------------------------------------------


def derived_key(execution_id: str, thread_id: str, position: str, name: str, ordinal: int) -> str:
    """Readable prefix + a hash of where the step runs. JSON, not a separator, joins the parts:
    positions of subgraphs contain ``|`` and names may contain anything."""
    identity = json.dumps([thread_id, position, name, ordinal])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:KEY_HASH_CHARS]
    return f"{execution_id}:{name}:{digest}"


def node_position(checkpoint_ns: str, step: Any, path: Any) -> str:
    """Where a node runs, the same every time the graph runs from the same checkpoint: its
    namespace without LangGraph's task ids, its superstep and its task path (which ``Send`` it
    is). Task ids derive from checkpoint ids, and a run that checkpoints only when it exits
    makes those afresh when it is run again after a crash; supersteps and paths do not change.
    Without them (LangGraph did not say), the namespace with its task ids stands in."""
    if step is None or path is None:
        return checkpoint_ns
    nodes = "|".join(part.split(":", 1)[0] for part in checkpoint_ns.split("|"))
    return json.dumps([nodes, step, path], default=str, separators=(",", ":"))


def explicit_key(execution_id: str, key: str) -> str:
    return f"{execution_id}:{key}"


def _key_for(run: StepRun, name: str, key: str | None) -> str:
    if key is not None:
        return explicit_key(run.execution_id, key)
    try:
        config: Mapping[str, Any] = get_config()
    except RuntimeError:  # not inside a runnable at all
        config = {}
    configurable: Mapping[str, Any] = config.get("configurable", {})
    checkpoint_ns = configurable.get("checkpoint_ns")
    if not checkpoint_ns:
        raise NoStepRun(
            f"step {name!r} ran outside a LangGraph node, so it has no deterministic key; "
            "call it from a node or give it an explicit key with run_step(..., key=...)"
        )
    thread_id = str(configurable.get("thread_id") or run.execution_id)
    # A node retried by its RetryPolicy keeps its position: counting per attempt gives the
    # retry the same keys, so steps the failed attempt completed are served from the cache.
    info = getattr(get_runtime(), "execution_info", None)
    node_attempt = int(getattr(info, "node_attempt", 1))
    metadata = config.get("metadata", {})
    position = node_position(
        str(checkpoint_ns), metadata.get("langgraph_step"), metadata.get("langgraph_path")
    )
    ordinal = run.next_ordinal((thread_id, position, node_attempt, name))
    step_key = derived_key(run.execution_id, thread_id, position, name, ordinal)
    if position != checkpoint_ns:
        # Steps stored before keys left task ids out were keyed by the full namespace: a run
        # resuming such an execution finds them under that key.
        legacy_ordinal = run.next_ordinal((thread_id, str(checkpoint_ns), node_attempt, name))
        legacy = derived_key(run.execution_id, thread_id, str(checkpoint_ns), name, legacy_ordinal)
        run.remember_legacy(step_key, legacy)
    return step_key


# --- results (pure) ---------------------------------------------------------------------------


def _return_annotation(fn: Callable[..., Any], name: str) -> Any:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.isclass(target):  # a constructor returns its class
        return target
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = type(target).__call__  # a callable object
    try:
        hints = typing.get_type_hints(target)
    except NameError as exc:
        raise StepError(
            f"step {name!r}: cannot resolve its return annotation ({exc}); the type must be "
            "importable at run time, not only under TYPE_CHECKING"
        ) from exc
    except TypeError:  # builtins and other objects without annotations
        return Any
    return hints.get("return", Any)


@functools.lru_cache(maxsize=256)
def _cached_adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _codec(fn: Callable[..., Any], name: str) -> TypeAdapter[Any]:
    """The TypeAdapter of the function's return type, so results come back as the same types.
    Worked out once per function: resolving type hints costs more than serving a cached step."""
    try:
        return _codec_of_function(fn, name)
    except TypeError:  # an unhashable callable: worked out each time
        return _uncached_codec(fn, name)


@functools.lru_cache(maxsize=1024)
def _codec_of_function(fn: Callable[..., Any], name: str) -> TypeAdapter[Any]:
    return _uncached_codec(fn, name)


def _uncached_codec(fn: Callable[..., Any], name: str) -> TypeAdapter[Any]:
    annotation = _return_annotation(fn, name)
    try:
        try:
            return _cached_adapter(annotation)
        except TypeError:  # an unhashable annotation: build it uncached
            return TypeAdapter(annotation)
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise StepError(f"step {name!r}: its return type cannot be stored as JSON: {exc}") from exc


def _encode(codec: TypeAdapter[Any], name: str, value: Any, budget: int) -> tuple[str, Any]:
    """JSON text and the value decoded from it. Decoding before storing proves the stored
    result will decode on every later hit, and returns the same value on a miss as on a hit."""
    try:
        data = codec.dump_json(value, warnings="error")
    except (PydanticSerializationError, PydanticSerializationUnexpectedValue) as exc:
        raise StepError(
            f"step {name!r} returned a value its return type cannot encode: {exc}"
        ) from exc
    if len(data) > budget:
        raise StepResultTooLarge(
            f"step {name!r} returned {len(data)} bytes of JSON; the budget is {budget} bytes. "
            "Store large data elsewhere and return a reference to it"
        )
    try:
        decoded = codec.validate_json(data)
    except ValidationError as exc:
        raise StepError(f"step {name!r}: its result does not round-trip as JSON: {exc}") from exc
    return data.decode(), decoded


def _decode(codec: TypeAdapter[Any], record: StepRecord) -> Any:
    try:
        return codec.validate_json(record.result)
    except ValidationError as exc:
        raise StepError(
            f"step {record.name!r}: the cached result under {record.key!r} no longer matches the "
            f"step's return type: {exc}"
        ) from exc


# --- running a step ---------------------------------------------------------------------------


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
    token = _current_key.set(key)
    try:
        yield
    finally:
        _current_key.reset(token)


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
    with run._lock:
        run.replayed.append(record)
    return True, _decode(codec, record)


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
    return _decode(codec, stored)


async def _run_async(
    run: StepRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str | None,
) -> Any:
    # The key is taken before the first await, so concurrent steps started in a fixed order
    # (asyncio.gather) get their ordinals in that order.
    step_key = _key_for(run, name, key)
    codec = _codec(fn, name)
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
        text, mine = _encode(codec, name, result, run.max_result_bytes)
        record = _record(run, step_key, name, text)
        stored = await _on_run_loop(run, lambda: _save(run, record))
        return _outcome(run, codec, stored, text, mine)


def _run_sync(
    run: StepRun,
    name: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    key: str | None,
) -> Any:
    # The store is async on run.loop; blocking that loop's own thread on it never returns.
    if _running_loop() is run.loop:
        raise StepError(
            f"sync step {name!r} was called on the event loop's thread (from an async node or "
            "coroutine), where waiting for the store would deadlock; make the step async "
            "(async def, await it) or use `await run_step(...)`"
        )
    if not run.loop.is_running():
        raise StepError(f"step {name!r}: the event loop of this step run is not running")
    step_key = _key_for(run, name, key)
    codec = _codec(fn, name)
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
        text, mine = _encode(codec, name, result, run.max_result_bytes)
        record = _record(run, step_key, name, text)
        stored = asyncio.run_coroutine_threadsafe(_save(run, record), run.loop).result()
        return _outcome(run, codec, stored, text, mine)


# --- the agent-facing API ---------------------------------------------------------------------


@overload
def durable_step(fn: F, /) -> F: ...


@overload
def durable_step(*, name: str | None = None) -> Callable[[F], F]: ...


def durable_step(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Make a sync or async function a durable step: ``@durable_step`` or
    ``@durable_step(name="send_email")``. The name (default: the function's qualified name) is
    part of the key; renaming a step re-runs it in executions that already ran it."""

    def decorate(fn: F) -> F:
        step_name = name or fn.__qualname__
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                run = _current_run.get()
                if run is None:
                    return await fn(*args, **kwargs)
                return await _run_async(run, step_name, fn, args, kwargs, None)

            return cast(F, run_async)

        @functools.wraps(fn)
        def run_sync(*args: Any, **kwargs: Any) -> Any:
            run = _current_run.get()
            if run is None:
                return fn(*args, **kwargs)
            return _run_sync(run, step_name, fn, args, kwargs, None)

        return cast(F, run_sync)

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
    run = _current_run.get()
    if run is None:
        result = fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    return await _run_async(run, name, fn, args, kwargs, key)


def run_step_sync(
    name: str, fn: Callable[..., T], /, *args: Any, key: str | None = None, **kwargs: Any
) -> T:
    """``run_step`` for sync code (sync nodes, which LangGraph runs in worker threads)."""
    run = _current_run.get()
    if run is None:
        return fn(*args, **kwargs)
    return cast(T, _run_sync(run, name, fn, args, kwargs, key))
