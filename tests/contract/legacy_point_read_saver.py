"""The sandbox's checkpointer before the async one (kept here only to write checkpoints the way
Interlock did before, so tests/contract/test_mongo_checkpoints.py shows that an execution
suspended then resumes after the upgrade).

LangGraph's MongoDB checkpointer, with every read and write a point read or write by ``_id``.

FerretDB answers a query on any field but ``_id`` by scanning the collection. ``MongoDBSaver``
finds, upserts and reads writes by (thread, namespace, checkpoint, task...) fields, and the
newest checkpoint of a thread with a server-side sort: every step of every run scanned the
checkpoint collections (the soak measured the sandbox's handling time growing with them, to
seconds). This saver stores the same documents, with the same fields, under ``_id`` keys built
from those fields, and keeps two small indexes of its own:

- ``checkpoint_heads``: the newest checkpoint id of each (thread, namespace) (``$max``: ids are
  monotonic), instead of the sorted query;
- ``checkpoint_write_sets``: for each ``put_writes`` call on a checkpoint, one document listing
  the ``_id`` of the writes it stored, numbered 0, 1, 2... per checkpoint, instead of a query on
  the writes collection. Insert-only, because an insert under a new ``_id`` is the one write
  FerretDB makes atomic: concurrent ``$addToSet`` on one array lost keys there (LangGraph writes
  a checkpoint's writes from concurrent calls).

So LangGraph's own saver still reads everything this one wrote (the documents are the same), and
this one still reads what LangGraph's wrote: a (thread, namespace) without a head is a thread
begun before this saver (or by LangGraph's), and is read and written LangGraph's way, with the
sort-free newest-id read below; a thread keeps the way it began with, so its writes never split
between the two. Telling the two apart costs a query by fields per new thread, so it is done
only where LangGraph's checkpoints exist when the sandbox starts (an upgrade from a version
before this saver: run one sandbox version at a time for that upgrade, since a thread an older
replica begins afterwards would look new to a replica that found none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.checkpoint.mongodb.utils import dumps_metadata, loads_metadata
from pymongo import UpdateOne
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

HEADS_COLLECTION = "checkpoint_heads"
WRITE_SETS_COLLECTION = "checkpoint_write_sets"
MAX_WRITE_SETS = 10_000


def key_of(*parts: str | int) -> str:
    """An ``_id`` from identifying fields: JSON, so no two tuples of fields share one."""
    return json.dumps(parts, separators=(",", ":"))


def _identifier(value: Any, name: str) -> str:
    # Identifiers go into query documents: anything but a string could be an operator.
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _upsert(collection: Collection[Any], key: str, update: dict[str, Any]) -> None:
    """Update or insert by ``_id``. Two upserts of a new ``_id`` at once (a checkpoint put again
    by a retried run) can both try the insert; the loser finds the document on its second try
    (MongoDB retries that itself, FerretDB reports the duplicate)."""
    try:
        collection.update_one({"_id": key}, update, upsert=True)
    except DuplicateKeyError:
        collection.update_one({"_id": key}, update, upsert=True)


class PointReadMongoDBSaver(MongoDBSaver):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heads_collection = self.db[HEADS_COLLECTION]
        self.write_sets_collection = self.db[WRITE_SETS_COLLECTION]
        self._keyed: set[tuple[str, str]] = set()
        """(thread, namespace) pairs known to be written this saver's way: skips the head read."""
        self._legacy: set[tuple[str, str]] = set()
        """Pairs LangGraph's way began: they stay so (until deleted)."""
        # One query at start-up: without any checkpoint of LangGraph's (under the driver's
        # ObjectIds), a thread without a head has no checkpoint at all, and a new thread costs
        # no query by fields. Only a database that holds LangGraph's checkpoints pays that, once
        # per thread, to tell its threads apart.
        self._legacy_present = (
            self.checkpoint_collection.find_one({"_id": {"$type": "objectId"}}, {"_id": 1})
            is not None
        )

    # --- which way a thread is stored --------------------------------------------------------

    def _is_keyed(self, thread_id: str, checkpoint_ns: str) -> bool:
        if (thread_id, checkpoint_ns) in self._keyed:
            return True
        if self.heads_collection.find_one({"_id": key_of(thread_id, checkpoint_ns)}) is None:
            return False
        self._keyed.add((thread_id, checkpoint_ns))
        return True

    def _writes_keyed(self, thread_id: str, checkpoint_ns: str) -> bool:
        """On a write: keyed unless LangGraph's way began the thread, which shows as checkpoint
        documents under the driver's ObjectIds (one query by fields, until the thread's head
        exists). LangGraph writes a checkpoint's pending writes while the checkpoint's own put
        may still be in flight, so a new thread's head may not exist yet on its first writes."""
        if (thread_id, checkpoint_ns) in self._legacy:
            return False
        if self._is_keyed(thread_id, checkpoint_ns):
            return True
        if not self._legacy_present:
            self._keyed.add((thread_id, checkpoint_ns))
            return True
        thread = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        found = self.checkpoint_collection.find(thread, {"_id": 1})
        if any(not isinstance(d["_id"], str) for d in found):
            self._legacy.add((thread_id, checkpoint_ns))
            return False
        self._keyed.add((thread_id, checkpoint_ns))
        return True

    # --- writes ------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = _identifier(configurable["thread_id"], "thread_id")
        checkpoint_ns = _identifier(configurable.get("checkpoint_ns", ""), "checkpoint_ns")
        if not self._writes_keyed(thread_id, checkpoint_ns):
            return super().put(config, checkpoint, metadata, new_versions)
        checkpoint_id = _identifier(checkpoint["id"], "checkpoint id")
        parent = configurable.get("checkpoint_id")
        type_, serialized = self.serde.dumps_typed(checkpoint)
        fields = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
        document: dict[str, Any] = {
            **fields,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": None if parent is None else _identifier(parent, "parent"),
            "type": type_,
            "checkpoint": serialized,
            "metadata": dumps_metadata(self.serde, get_checkpoint_metadata(config, metadata)),
        }
        if self.ttl:
            document["created_at"] = datetime.now(tz=UTC)
        _upsert(
            self.checkpoint_collection,
            key_of(thread_id, checkpoint_ns, checkpoint_id),
            {"$set": document},
        )
        # After the checkpoint: a reader that sees the head finds its document.
        _upsert(
            self.heads_collection,
            key_of(thread_id, checkpoint_ns),
            {"$set": fields, "$max": {"checkpoint_id": checkpoint_id}},
        )
        self._keyed.add((thread_id, checkpoint_ns))
        return {"configurable": {**fields, "checkpoint_id": checkpoint_id}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        thread_id = _identifier(configurable["thread_id"], "thread_id")
        checkpoint_ns = _identifier(configurable.get("checkpoint_ns", ""), "checkpoint_ns")
        if not self._writes_keyed(thread_id, checkpoint_ns):
            super().put_writes(config, writes, task_id, task_path)
            return
        checkpoint_id = _identifier(configurable["checkpoint_id"], "checkpoint_id")
        _identifier(task_id, "task_id")
        _identifier(task_path, "task_path")
        # As LangGraph's saver: replace existing writes only for its special channels (errors,
        # interrupts...); any other write keeps its first value.
        set_method = "$set" if all(w[0] in WRITES_IDX_MAP for w in writes) else "$setOnInsert"
        now = datetime.now(tz=UTC)
        operations = []
        keys = []
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            key = key_of(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx)
            type_, serialized = self.serde.dumps_typed(value)
            document: dict[str, Any] = {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "type": type_,
                "value": serialized,
            }
            if self.ttl:
                document["created_at"] = now
            operations.append(UpdateOne({"_id": key}, {set_method: document}, upsert=True))
            keys.append(key)
        if not operations:
            return
        self.writes_collection.bulk_write(operations)
        # After the writes: a reader that finds the set finds its documents.
        checkpoint_key = (thread_id, checkpoint_ns, checkpoint_id)
        for number in range(MAX_WRITE_SETS):
            try:
                self.write_sets_collection.insert_one(
                    {"_id": key_of(*checkpoint_key, number), "thread_id": thread_id, "keys": keys}
                )
                return
            except DuplicateKeyError:
                continue  # that number is taken (an earlier call, or a concurrent one): next
        raise RuntimeError(f"over {MAX_WRITE_SETS} write sets on checkpoint {checkpoint_key}")

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        self.heads_collection.delete_many({"thread_id": _identifier(thread_id, "thread_id")})
        self.write_sets_collection.delete_many({"thread_id": thread_id})
        self._keyed = {pair for pair in self._keyed if pair[0] != thread_id}
        self._legacy = {pair for pair in self._legacy if pair[0] != thread_id}

    # --- reads -------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread = {
            "thread_id": _identifier(configurable["thread_id"], "thread_id"),
            "checkpoint_ns": _identifier(configurable.get("checkpoint_ns", ""), "checkpoint_ns"),
        }
        if not self._legacy_present or self._is_keyed(thread["thread_id"], thread["checkpoint_ns"]):
            return self._keyed_tuple(thread, get_checkpoint_id(config))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            ids = [
                str(d["checkpoint_id"])
                for d in self.checkpoint_collection.find(thread, {"checkpoint_id": 1})
            ]
            if not ids:
                return None
            checkpoint_id = max(ids)  # ids are monotonic (uuid6): the newest sorts last
        key = {**thread, "checkpoint_id": _identifier(checkpoint_id, "checkpoint_id")}
        doc = self.checkpoint_collection.find_one(key)
        if doc is None:
            return None
        return self._tuple(thread, checkpoint_id, doc, self.writes_collection.find(key))

    def _keyed_tuple(
        self, thread: dict[str, str], checkpoint_id: str | None
    ) -> CheckpointTuple | None:
        if checkpoint_id is None:
            head = self.heads_collection.find_one(
                {"_id": key_of(thread["thread_id"], thread["checkpoint_ns"])}
            )
            if head is None:
                return None
            checkpoint_id = str(head["checkpoint_id"])
        checkpoint_id = _identifier(checkpoint_id, "checkpoint_id")
        doc = self.checkpoint_collection.find_one(
            {"_id": key_of(thread["thread_id"], thread["checkpoint_ns"], checkpoint_id)}
        )
        if doc is None:
            return None
        keys: dict[str, None] = {}  # in order, once each (a retried call repeats its keys)
        for number in range(MAX_WRITE_SETS):
            found = self.write_sets_collection.find_one(
                {"_id": key_of(thread["thread_id"], thread["checkpoint_ns"], checkpoint_id, number)}
            )
            if found is None:
                break
            keys.update(dict.fromkeys(found["keys"]))
        writes = [self.writes_collection.find_one({"_id": key}) for key in keys]
        return self._tuple(thread, checkpoint_id, doc, (w for w in writes if w is not None))

    def _tuple(
        self,
        thread: dict[str, str],
        checkpoint_id: str,
        doc: dict[str, Any],
        writes: Iterable[dict[str, Any]],
    ) -> CheckpointTuple:
        """A checkpoint document and its pending writes, as LangGraph's saver returns them."""
        parent = doc.get("parent_checkpoint_id")
        return CheckpointTuple(
            {"configurable": {**thread, "checkpoint_id": checkpoint_id}},
            self.serde.loads_typed((doc["type"], doc["checkpoint"])),
            loads_metadata(self.serde, doc["metadata"]),
            {"configurable": {**thread, "checkpoint_id": parent}} if parent else None,
            [
                (w["task_id"], w["channel"], self.serde.loads_typed((w["type"], w["value"])))
                # LangGraph writes a checkpoint's writes from concurrent calls: no stored order
                # is theirs. Ordered as LangGraph's Postgres saver orders them.
                for w in sorted(writes, key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
            ],
        )
