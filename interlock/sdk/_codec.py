"""Step results as JSON: encoded with the step's return type, so they come back as that type."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic_core import PydanticSerializationError, PydanticSerializationUnexpectedValue

from interlock.sdk._errors import StepError, StepResultTooLarge
from shared.store.ports import StepRecord

__all__ = ["codec_for", "decode", "encode"]


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


def codec_for(fn: Callable[..., Any], name: str) -> TypeAdapter[Any]:
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


def encode(codec: TypeAdapter[Any], name: str, value: Any, budget: int) -> tuple[str, Any]:
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


def decode(codec: TypeAdapter[Any], record: StepRecord) -> Any:
    """A stored result as the step's return type (raises ``StepError`` if it no longer fits)."""
    try:
        return codec.validate_json(record.result)
    except ValidationError as exc:
        raise StepError(
            f"step {record.name!r}: the cached result under {record.key!r} no longer matches the "
            f"step's return type: {exc}"
        ) from exc
