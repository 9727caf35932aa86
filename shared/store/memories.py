"""Agents' long-term memory: LangGraph's cross-thread store (``BaseStore``), per workspace.

An item is a JSON object under a namespace (a path of labels, LangGraph's ``("users", "u-1")``)
and a key. Every item belongs to one tenant, a (project, workspace): every operation names it,
and nothing of another tenant is ever read, listed or written (the namespace a graph or a client
sees never holds the tenant; adapters keep it beside). The rules are LangGraph's, as its
``BaseStore`` and the Agent Server's ``/store`` routes define them:

- a namespace has at least one label; a label is a non-empty string without ``.`` (the API joins
  labels with it), and the first is not ``langgraph`` (reserved by LangGraph);
- ``put`` creates or replaces an item (its ``created_at`` kept), a put of ``None`` deletes it;
- ``search`` finds the items under a namespace prefix (label by label: ``("a",)`` holds
  ``("a", "b")``, not ``("ab",)``), most recently updated first, matching an optional
  ``filter`` on the value (``matches_filter``), paged by ``offset`` and ``limit``;
- ``list_namespaces`` lists the namespaces that hold items, sorted, by prefix and suffix
  (``*`` matching any label), cut to ``max_depth`` labels;
- an item may have a time to live in minutes (``ttl``): it expires that long after its last
  write, or after its last read when the read refreshes it (LangGraph's default). Expired items
  are never returned nor listed, even before the sweep (``expire``) deletes them.

Values are kept as JSON text, never as document keys (FerretDB rejects keys holding ``.`` or
starting with ``$``, and an agent's values are its own), so a filter is matched here, in
Python, on the items of the prefix in their order: reading stops once ``offset + limit`` have
matched. Times are kept to the millisecond (what a BSON date holds), so an item reads back the
same from every adapter.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

import pydantic_core
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from shared.events import utc_now

MAX_VALUE_BYTES = 1_048_576
"""The largest value, as JSON text (LangGraph sets none; a MongoDB document holds 16 MiB)."""
MAX_TTL_MINUTES = 10 * 366 * 24 * 60.0
MAX_LABELS = 20
MAX_LABEL_CHARS = 256
MAX_KEY_CHARS = 1024
RESERVED_ROOT = "langgraph"
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


class Tenant(NamedTuple):
    project_id: str
    workspace_id: str


Namespace = tuple[str, ...]


class InvalidMemory(ValueError):
    """A namespace, key, value or filter that LangGraph's rules refuse: the caller's mistake."""


class MemoryValueTooLarge(InvalidMemory):
    pass


def to_the_millisecond(at: datetime) -> datetime:
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


class MemoryItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    tenant: Tenant
    namespace: Namespace
    key: str
    value: dict[str, Any]
    created_at: AwareDatetime = Field(default_factory=utc_now)
    updated_at: AwareDatetime = Field(default_factory=utc_now)
    ttl_minutes: float | None = None
    expires_at: AwareDatetime | None = None
    """``ttl_minutes`` after the last write or refreshing read; None: kept until deleted."""

    @field_validator("created_at", "updated_at", "expires_at")
    @classmethod
    def _kept_to_the_millisecond(cls, value: datetime | None) -> datetime | None:
        return None if value is None else to_the_millisecond(value)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def refreshed(self, now: datetime) -> MemoryItem:
        """The item as a refreshing read leaves it: its expiry moved to ``ttl`` from ``now``."""
        if self.ttl_minutes is None:
            return self
        return self.model_copy(update={"expires_at": expiry_after(now, self.ttl_minutes)})

    def value_json(self) -> str:
        return value_json(self.value)

    def body(self) -> dict[str, Any]:
        """As LangGraph's API answers an item (``Item``: ISO times, the namespace a list)."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class MemoryStore(Protocol):
    """What each adapter does: reads and writes by tenant, namespace and key; the rules above
    are this module's, applied around it (``search_items``, ``listed_namespaces``)."""

    async def put(self, item: MemoryItem) -> None:
        """Create or replace the item: an item already under its key keeps its
        ``created_at``; everything else is ``item``'s."""
        ...

    async def get(self, tenant: Tenant, namespace: Namespace, key: str) -> MemoryItem | None:
        """The item, expired or not (callers check), or None."""
        ...

    async def delete(self, tenant: Tenant, namespace: Namespace, key: str) -> None: ...

    def search(
        self, tenant: Tenant, prefix: Namespace, *, at_most: int | None
    ) -> AsyncIterator[MemoryItem]:
        """The items under ``prefix`` (every item of the tenant for ``()``), expired or not,
        most recently updated first (then by namespace and key); ``at_most`` items when given,
        else all of them, read in batches as they are iterated."""
        ...

    async def namespace_expiries(
        self, tenant: Tenant, prefix: Namespace
    ) -> list[tuple[Namespace, datetime | None]]:
        """The namespace and expiry of every item under ``prefix`` (a projection: no values)."""
        ...

    async def refresh(self, items: Sequence[MemoryItem]) -> None:
        """Write the ``expires_at`` of each item (read, then ``refreshed``) alone."""
        ...

    async def expire(self, now: datetime, *, limit: int) -> int:
        """Delete up to ``limit`` items expired by ``now``, in every tenant; how many."""
        ...

    async def ensure_indexes(self) -> None: ...


def check_namespace(namespace: Sequence[Any], *, prefix: bool = False) -> Namespace:
    """``namespace`` as LangGraph accepts it (at least one label unless ``prefix``), bounded."""
    labels = tuple(namespace)
    if not labels and not prefix:
        raise InvalidMemory("a namespace has at least one label")
    if len(labels) > MAX_LABELS:
        raise InvalidMemory(f"a namespace has at most {MAX_LABELS} labels")
    for label in labels:
        if not isinstance(label, str) or not label:
            raise InvalidMemory(f"namespace label {label!r} is not a non-empty string")
        if "." in label:
            raise InvalidMemory(f"namespace label {label!r} contains a period ('.')")
        if "\x00" in label:
            # Labels are stored as strings of their own, and PostgreSQL (FerretDB's backend)
            # stores no NUL in a JSON string.
            raise InvalidMemory("a namespace label may not contain the NUL character")
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidMemory(f"a namespace label has at most {MAX_LABEL_CHARS} characters")
    if labels and labels[0] == RESERVED_ROOT and not prefix:
        raise InvalidMemory(f"the root label {RESERVED_ROOT!r} is reserved")
    return labels


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidMemory("an item's key is a non-empty string")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidMemory(f"an item's key has at most {MAX_KEY_CHARS} characters")
    if "\x00" in key:
        raise InvalidMemory("an item's key may not contain the NUL character")
    return key


def value_json(value: Mapping[str, Any]) -> str:
    """The value as stored: JSON text, what is not JSON (a datetime, a model) made so as
    pydantic does, at most ``MAX_VALUE_BYTES``."""
    try:
        text = json.dumps(
            value,
            separators=(",", ":"),
            ensure_ascii=False,
            default=pydantic_core.to_jsonable_python,
        )
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError) as exc:
        raise InvalidMemory(f"the value is not JSON: {exc}") from exc
    if len(text.encode()) > MAX_VALUE_BYTES:
        raise MemoryValueTooLarge(f"the value's JSON is over {MAX_VALUE_BYTES} bytes")
    return text


def value_of(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def check_ttl(ttl_minutes: float | None) -> float | None:
    if ttl_minutes is None:
        return None
    if not math.isfinite(ttl_minutes) or not 0 < ttl_minutes <= MAX_TTL_MINUTES:
        raise InvalidMemory(
            f"ttl is a number of minutes above 0 and at most {MAX_TTL_MINUTES:.0f} (ten years),"
            " or null for none"
        )
    return float(ttl_minutes)


def expiry_after(now: datetime, ttl_minutes: float | None) -> datetime | None:
    return None if ttl_minutes is None else to_the_millisecond(now + timedelta(minutes=ttl_minutes))


def new_item(
    tenant: Tenant,
    namespace: Sequence[Any],
    key: Any,
    value: Any,
    *,
    ttl_minutes: float | None,
    now: datetime,
) -> MemoryItem:
    """An item to put, checked: ``created_at`` is ``now`` here, the stored one where it exists."""
    if not isinstance(value, Mapping):
        raise InvalidMemory("an item's value is a JSON object")
    ttl = check_ttl(ttl_minutes)
    # Through JSON once: what is stored is what reads back (a tuple becomes a list).
    return MemoryItem(
        tenant=tenant,
        namespace=check_namespace(namespace),
        key=check_key(key),
        value=value_of(value_json(value)),
        created_at=now,
        updated_at=now,
        ttl_minutes=ttl,
        expires_at=expiry_after(now, ttl),
    )


# -- filters: LangGraph's, as its stores match them (JSONB containment and six operators)


def check_filter(filter: Any) -> dict[str, Any] | None:
    """``filter`` if LangGraph's stores can match it; an unknown ``$`` operator is refused."""
    if filter is None:
        return None
    if not isinstance(filter, dict):
        raise InvalidMemory("filter is an object of value paths to match")

    def walk(condition: Any) -> None:
        if isinstance(condition, dict):
            for name, inner in condition.items():
                if name.startswith("$") and name not in OPERATORS:
                    raise InvalidMemory(
                        f"filter operator {name!r} is not one of {', '.join(sorted(OPERATORS))}"
                    )
                walk(inner)
        elif isinstance(condition, list):
            for inner in condition:
                walk(inner)

    walk(filter)
    return filter


def matches_filter(value: Any, filter: Mapping[str, Any]) -> bool:
    """Whether ``value`` holds every condition of ``filter``: a key's value equal (objects
    matched key by key, lists element by element), or an object of operators ``$eq``, ``$ne``,
    ``$gt``, ``$gte``, ``$lt``, ``$lte`` (the ordering ones on numbers; a value that is not one
    does not match, where LangGraph's in-memory store would raise)."""
    return _compare(value, dict(filter))


def _compare(value: Any, condition: Any) -> bool:
    if isinstance(condition, dict):
        if any(name.startswith("$") for name in condition):
            return all(_operator(value, name, operand) for name, operand in condition.items())
        if not isinstance(value, dict):
            return False
        return all(_compare(value.get(name), inner) for name, inner in condition.items())
    if isinstance(condition, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(condition)
            and all(_compare(v, c) for v, c in zip(value, condition, strict=True))
        )
    return bool(value == condition)


def _operator(value: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(value == operand)
    if name == "$ne":
        return bool(value != operand)
    try:
        left, right = float(value), float(operand)
    except (TypeError, ValueError):
        return False
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[name]


# -- reads, with the rules of this module around an adapter's


async def get_item(
    store: MemoryStore,
    tenant: Tenant,
    namespace: Namespace,
    key: str,
    *,
    now: datetime,
    refresh: bool = True,
) -> MemoryItem | None:
    """The live item, its expiry moved on when ``refresh`` (one more write, for an item with a
    ttl only)."""
    item = await store.get(tenant, namespace, key)
    if item is None or item.expired(now):
        return None
    if refresh and item.ttl_minutes is not None:
        item = item.refreshed(now)
        await store.refresh([item])
    return item


async def search_items(
    store: MemoryStore,
    tenant: Tenant,
    prefix: Namespace,
    *,
    now: datetime,
    filter: Mapping[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
    refresh: bool = True,
) -> list[MemoryItem]:
    """The page ``offset`` .. ``offset + limit`` of the live items under ``prefix`` that match
    ``filter``, most recently updated first. Without a filter the adapter reads that many (expired
    items aside); with one, the prefix's items in order until enough matched."""
    wanted = offset + limit
    found: list[MemoryItem] = []
    matched = 0
    async for item in store.search(tenant, prefix, at_most=None if filter else wanted):
        if item.expired(now) or (filter and not matches_filter(item.value, filter)):
            continue
        matched += 1
        if matched > offset:
            found.append(item)
        if matched >= wanted:
            break
    if refresh:
        moved = [item.refreshed(now) for item in found if item.ttl_minutes is not None]
        if moved:
            await store.refresh(moved)
            by_key = {(m.namespace, m.key): m for m in moved}
            found = [by_key.get((i.namespace, i.key), i) for i in found]
    return found


def _fits(namespace: Namespace, pattern: Namespace, *, from_end: bool) -> bool:
    if len(namespace) < len(pattern):
        return False
    labels = namespace[len(namespace) - len(pattern) :] if from_end else namespace[: len(pattern)]
    return all(want in ("*", label) for label, want in zip(labels, pattern, strict=True))


def listed_namespaces(
    namespaces: Iterable[Namespace],
    *,
    prefix: Namespace = (),
    suffix: Namespace = (),
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[Namespace]:
    """LangGraph's ``list_namespaces`` over the namespaces that hold items: those matching
    ``prefix`` and ``suffix`` (``*`` matching any label), each cut to ``max_depth`` labels, once
    each, sorted, then paged."""
    kept = {
        namespace[:max_depth] if max_depth is not None else namespace
        for namespace in namespaces
        if _fits(namespace, prefix, from_end=False) and _fits(namespace, suffix, from_end=True)
    }
    return sorted(kept)[offset : offset + limit]


def literal_prefix(pattern: Namespace) -> Namespace:
    """The labels of ``pattern`` before its first wildcard: what an adapter can look up."""
    for index, label in enumerate(pattern):
        if label == "*":
            return pattern[:index]
    return pattern


async def namespaces_of(
    store: MemoryStore,
    tenant: Tenant,
    *,
    now: datetime,
    prefix: Namespace = (),
    suffix: Namespace = (),
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[Namespace]:
    held = await store.namespace_expiries(tenant, literal_prefix(prefix))
    live = (namespace for namespace, expires in held if expires is None or expires > now)
    return listed_namespaces(
        live, prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
    )


# -- how adapters key and find items


def item_id(tenant: Tenant, namespace: Namespace, key: str) -> str:
    """An item's unique key in every adapter: JSON of the tenant, the labels and the key, which
    no two items share (labels and keys may hold any character but ``.``, ``/`` included)."""
    return json.dumps([tenant.project_id, tenant.workspace_id, list(namespace), key])


def prefix_path(tenant: Tenant, prefix: Namespace) -> str:
    """What every item under ``prefix`` lists among its ``index_paths``. A namespace's labels
    hold no ``.``, so joined by it they are unambiguous; project and workspace ids hold no
    ``/`` (shared/events.py ``Identifier``)."""
    return f"{tenant.project_id}/{tenant.workspace_id}/" + ".".join(prefix)


def index_paths(tenant: Tenant, namespace: Namespace) -> list[str]:
    """The ``prefix_path`` of each prefix of ``namespace``, the tenant's own (``()``) first: an
    item is found under a prefix by one equality on this list (a multikey index in MongoDB)."""
    return [prefix_path(tenant, namespace[:depth]) for depth in range(len(namespace) + 1)]
