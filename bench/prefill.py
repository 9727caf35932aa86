"""History for the history-growth figure: thousands of finished executions stored in seconds.

Running 20,000 executions would take hours on this machine. Instead, one execution that the
services ran to completion is the template: every document of every collection that names its
id (execution versions and head, attempts, steps, decision claim, sent commands, progress,
LangGraph's checkpoints, writes and their indexes...) is copied N times with the id replaced by a
fresh one, and inserted in bulk. The copies have exactly the shapes the services wrote, whatever
they are at this commit, so the figure follows the data path as it changes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any

from bson import Binary, ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

Document = dict[str, Any]
CHUNK = 1_000
DUPLICATE_KEY = 11000


def replaced(value: Any, old: str, new: str) -> Any:
    """``value`` with every occurrence of ``old`` (in strings, keys and binary data) replaced by
    ``new``. Both are execution ids of the same length, so length-prefixed encodings inside
    binary data (LangGraph's msgpack checkpoints) stay valid."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, Binary):
        return Binary(bytes(value).replace(old.encode(), new.encode()), value.subtype)
    if isinstance(value, bytes):
        return value.replace(old.encode(), new.encode())
    if isinstance(value, dict):
        return {replaced(k, old, new): replaced(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, old, new) for v in value]
    return value


def _names(value: Any, needle: bytes) -> bool:
    if isinstance(value, str):
        return needle.decode() in value
    if isinstance(value, bytes):
        return needle in value
    if isinstance(value, dict):
        return any(_names(k, needle) or _names(v, needle) for k, v in value.items())
    if isinstance(value, list):
        return any(_names(v, needle) for v in value)
    return False


async def documents_of(database: Any, execution_id: str) -> dict[str, list[Document]]:
    """Every document naming ``execution_id``, by collection (reads whole collections: meant for
    a database holding a few executions)."""
    needle = execution_id.encode()
    found: dict[str, list[Document]] = {}
    for name in sorted(await database.list_collection_names()):
        if name.startswith("system."):
            continue
        docs = [d async for d in database[name].find({}) if _names(d, needle)]
        if docs:
            found[name] = docs
    return found


def copies(docs: list[Document], old: str, new: str) -> Iterable[Document]:
    for doc in docs:
        copy: Document = replaced(doc, old, new)
        if isinstance(doc.get("_id"), ObjectId):
            copy.pop("_id")  # a driver-made id: the server makes a fresh one
        yield copy


async def _insert(collection: AsyncCollection[Document], batch: list[Document]) -> int:
    """Inserted count; duplicates (an id the replacement did not reach) are skipped."""
    try:
        result = await collection.insert_many(batch, ordered=False)
        return len(result.inserted_ids)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(e.get("code") != DUPLICATE_KEY for e in errors):
            raise
        return int(exc.details.get("nInserted", 0))


async def clone_finished(uri: str, database: str, execution_id: str, count: int) -> dict[str, Any]:
    """Store ``count`` copies of the finished execution ``execution_id``; returns what was
    inserted where, and how long it took."""
    client: AsyncMongoClient[Document] = AsyncMongoClient(uri, tz_aware=True)
    try:
        db = client[database]
        template = await documents_of(db, execution_id)
        ids = [str(uuid.uuid4()) for _ in range(count)]
        assert all(len(i) == len(execution_id) for i in ids), "execution ids are uuid4 strings"
        began = time.perf_counter()
        inserted: dict[str, int] = {}
        for name, docs in template.items():
            batch: list[Document] = []
            inserted[name] = 0
            for new in ids:
                batch.extend(copies(docs, execution_id, new))
                if len(batch) >= CHUNK:
                    inserted[name] += await _insert(db[name], batch)
                    batch = []
            if batch:
                inserted[name] += await _insert(db[name], batch)
        return {
            "executions": count,
            "template": execution_id,
            "documents_per_execution": {name: len(docs) for name, docs in template.items()},
            "inserted": inserted,
            "seconds": round(time.perf_counter() - began, 1),
        }
    finally:
        await client.close()
