"""LangGraph checkpoints on MongoDB, async-native, in as few commands as a run allows.

A run segment of Interlock's sandbox reads its thread once and writes once: the runner asks
LangGraph to persist only when the run exits (``durability="exit"``: it suspends, completes or
fails; the step cache, not the checkpoint, keeps a crashed run's side effects from repeating),
and within a run (``run_scope``) this saver answers reads of the thread from what it last read or
wrote instead of the database, and keeps what the run writes until the run ends: the newest
checkpoint and its pending writes then go to the thread's head together, in one command, and
the next run reads both in one. Every command is by ``_id`` (FerretDB scans a collection for any
other filter):

- ``checkpoint_heads``: per (thread, namespace) its newest checkpoint, LangGraph's fields: the
  latest is one read, and a put is one ``findAndModify`` that returns the head it replaced. The
  head also keeps what the run asks to keep with it (``run_scope``'s ``extra``: the sandbox's
  step index and the attempt that wrote it, services/sandbox/step_index.py), and the run's
  ``guard`` judges the head it replaced: a superseded attempt finds a newer attempt's head
  there, puts it back and stops (``Fenced``), so a checkpoint write fences itself;
- ``checkpoints``: the checkpoints a head replaced, one document each, ``_id`` from (thread,
  namespace, id): history, ``alist`` and reads of a given checkpoint. Archived when the next put
  replaces them (a crash in between loses that entry of the history, never the newest);
- a head written at the end of a run holds its checkpoint's pending writes too (``writes``, and
  ``writes_complete``: nothing else holds any), so resuming reads no write set;
- ``checkpoint_write_sets``: writes made outside a run, or to a checkpoint older than the run's
  newest: per ``put_writes`` call, one insert-only document holding its writes, numbered 0, 1,
  2... per checkpoint. LangGraph writes a checkpoint's writes from concurrent calls and FerretDB
  makes only an insert under a new ``_id`` atomic, so a call never updates another's document;
  such a call also clears the head's ``writes_complete`` when the head is that checkpoint, so
  its set is read. (A run owns its thread, the sandbox fences every other: nobody writes a set
  of the checkpoint a run is about to end with.) Write sets of the point-read saver before this
  one list the ``_id`` of documents in ``checkpoint_writes`` instead (``keys``): they are still
  read, and so are its heads (the newest id only), so executions suspended before the upgrade
  resume.

A checkpoint or a write of 1 KiB or more is stored compressed, its type saying so
(shared/store/mongo/compression.py): what a turn moves no longer grows with the conversation as
fast as its state does.

Writes merge as LangGraph's savers merge them: a write of a special channel (errors, interrupts,
resumes) replaces an earlier one of the same task and index, any other write keeps its first
value.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.mongodb.utils import dumps_metadata, loads_metadata
from pymongo import ReturnDocument
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from services.sandbox.checkpoint_run import Known, Run, current_run, store_held
from services.sandbox.checkpoint_run import run_scope as run_scope
from services.sandbox.thread_base import BASE_COPY_KEY
from shared.errors import Fenced
from shared.store.mongo.checkpoint_erasure import CHECKPOINTS, HEADS, LEGACY_WRITES, WRITE_SETS
from shared.store.mongo.compression import loaded_typed, stored_typed

MAX_WRITE_SETS = 10_000

Document = dict[str, Any]


def key_of(*parts: str | int) -> str:
    """An ``_id`` from identifying fields: JSON, so no two tuples of fields share one."""
    return json.dumps(parts, separators=(",", ":"))


def _identifier(value: Any, name: str) -> str:
    # Identifiers go into query documents: anything but a string could be an operator.
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _thread_of(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return (
        _identifier(configurable["thread_id"], "thread_id"),
        _identifier(configurable.get("checkpoint_ns", ""), "checkpoint_ns"),
    )


class AsyncMongoSaver(BaseCheckpointSaver[int]):
    def __init__(self, database: AsyncDatabase[Document], *, compress: bool = True) -> None:
        """``compress``: store checkpoints and writes compressed once big enough
        (shared/store/mongo/compression.py); both forms are read either way."""
        super().__init__()
        self._compress = compress
        self._checkpoints = database[CHECKPOINTS]
        self._heads = database[HEADS]
        self._write_sets = database[WRITE_SETS]
        self._legacy_writes = database[LEGACY_WRITES]

    # --- writes ------------------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.aput_serialized(
            config, checkpoint["id"], self.serde.dumps_typed(checkpoint), metadata
        )

    async def aput_serialized(
        self,
        config: RunnableConfig,
        checkpoint_id: str,
        typed: tuple[str, bytes],
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        """``aput`` of a checkpoint its caller serialized already (services/sandbox/
        checkpoint_bytes.py)."""
        stored = stored_typed(typed, enabled=self._compress)
        return await self._put_stored(config, checkpoint_id, stored, metadata)

    async def _put_stored(
        self,
        config: RunnableConfig,
        checkpoint_id: str,
        stored: tuple[str, bytes],
        metadata: CheckpointMetadata,
    ) -> RunnableConfig:
        """``aput`` of a checkpoint in its stored form (``stored_typed``)."""
        thread_id, checkpoint_ns = _thread_of(config)
        checkpoint_id = _identifier(checkpoint_id, "checkpoint id")
        parent = config["configurable"].get("checkpoint_id")
        metadata = get_checkpoint_metadata(config, metadata)
        document: Document = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": None if parent is None else _identifier(parent, "parent"),
            "type": stored[0],
            "checkpoint": stored[1],
            "metadata": dumps_metadata(self.serde, metadata),
        }
        run = current_run()
        if run is not None:
            key = (thread_id, checkpoint_ns)
            previous = run.newest.get(key)
            if previous is not None and previous.saver is not None and previous.kept:
                # Another checkpoint in the same run (never with durability="exit" but after a
                # turn's copy of its base, which is not kept): the one before goes to the
                # database now, so history keeps it.
                await self.write_head(run, key, previous)
            # The same object the checkpoint's writes went to: LangGraph may store them before
            # the checkpoint, even concurrently with it.
            known = run.early.pop((thread_id, checkpoint_ns, checkpoint_id), None) or Known({})
            known.document = document
            known.saver = self
            known.kept = BASE_COPY_KEY not in (metadata or {})
            run.newest[key] = known
        else:
            await self._put_head(thread_id, checkpoint_ns, document, None)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    async def acopy_checkpoint(
        self, source: RunnableConfig, target: RunnableConfig, metadata: dict[str, Any]
    ) -> bool:
        """A checkpoint put under another thread as it is stored: its bytes are neither decoded
        (services/sandbox/checkpoint_bytes.py) nor decompressed; its metadata, a few small
        values, is."""
        thread_id, checkpoint_ns = _thread_of(source)
        found = await self._stored(thread_id, checkpoint_ns, get_checkpoint_id(source))
        if found is None:
            return False
        document, _ = found
        updated: Any = {**loads_metadata(self.serde, document["metadata"]), **metadata}
        stored = (document["type"], document["checkpoint"])
        await self._put_stored(target, document["checkpoint_id"], stored, updated)
        return True

    async def write_head(self, run: Run, key: tuple[str, str], known: Known) -> None:
        """Store a checkpoint the run holds, with its writes, as its thread's head."""
        head = {
            k: v
            for k, v in known.document.items()
            if k not in ("_id", "interlock", "writes", "writes_complete")
        }
        head["writes"] = known.writes
        head["writes_complete"] = True
        if run.extra is not None:
            head["interlock"] = run.extra()
        await self._put_head(key[0], key[1], head, run.guard, run.heads.get(key))
        known.saver = None

    async def _put_head(
        self,
        thread_id: str,
        checkpoint_ns: str,
        head: Document,
        guard: Callable[[dict[str, Any] | None], bool] | None,
        read: Document | None = None,
    ) -> None:
        """One ``findAndModify`` of the thread's head; the head it replaced is archived (or, when a
        newer attempt wrote it, put back, and the run stops). ``read``: the head as the run read
        it, which is what the command normally replaces (the run owns its thread), archived
        meanwhile; the replaced one is archived after only when it is another."""
        head_id = key_of(thread_id, checkpoint_ns)
        early = read if _replaceable(read, head) else None
        replacing = self._heads.find_one_and_replace(
            {"_id": head_id}, head, upsert=True, return_document=ReturnDocument.BEFORE
        )
        if early is None:
            replaced = await replacing
        else:
            # Archiving a checkpoint of the history is right whatever the command finds: at worst
            # (a newer attempt's head, a head changed since the read) it is one more entry.
            replaced, _ = await _together(replacing, self._archive(thread_id, checkpoint_ns, early))
        if replaced is not None and guard is not None and not guard(replaced.get("interlock")):
            # A newer attempt wrote it: theirs goes back, and this run stops here.
            await self._heads.replace_one({"_id": head_id}, replaced)
            raise Fenced(f"checkpoint of {thread_id}: a newer attempt wrote the thread's head")
        if _replaceable(replaced, head) and not _same(replaced, early):
            assert replaced is not None
            await self._archive(thread_id, checkpoint_ns, replaced)

    async def _archive(self, thread_id: str, checkpoint_ns: str, replaced: Document) -> None:
        # Archived writes may be joined by write sets later: only a head says "complete".
        archived = {
            k: v for k, v in replaced.items() if k not in ("_id", "interlock", "writes_complete")
        }
        await self._checkpoints.replace_one(
            {"_id": key_of(thread_id, checkpoint_ns, str(replaced["checkpoint_id"]))},
            archived,
            upsert=True,
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if not writes:
            return
        thread_id, checkpoint_ns = _thread_of(config)
        checkpoint_id = _identifier(config["configurable"]["checkpoint_id"], "checkpoint_id")
        _identifier(task_id, "task_id")
        _identifier(task_path, "task_path")
        stored = []
        for position, (channel, value) in enumerate(writes):
            type_, serialized = stored_typed(self.serde.dumps_typed(value), enabled=self._compress)
            stored.append(
                {
                    "task_id": task_id,
                    "task_path": task_path,
                    "idx": WRITES_IDX_MAP.get(channel, position),
                    "channel": channel,
                    "type": type_,
                    "value": serialized,
                }
            )
        replaces = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        current = self._known_writes(thread_id, checkpoint_ns, checkpoint_id)
        if current is not None:
            # The run's newest checkpoint, or one it has not put yet: held with it, stored
            # when the run ends.
            current.writes = _merged(current.writes, stored, replaces=replaces)
            current.saver = self
            return
        await self.insert_write_set(thread_id, checkpoint_ns, checkpoint_id, stored, replaces)
        # A head that said it held all its writes no longer does.
        await self._heads.update_one(
            {
                "_id": key_of(thread_id, checkpoint_ns),
                "checkpoint_id": checkpoint_id,
                "writes_complete": True,
            },
            {"$set": {"writes_complete": False}},
        )

    async def insert_write_set(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        stored: list[Document],
        replaces: bool,
    ) -> None:
        for number in range(MAX_WRITE_SETS):
            try:
                await self._write_sets.insert_one(
                    {
                        "_id": key_of(thread_id, checkpoint_ns, checkpoint_id, number),
                        "thread_id": thread_id,
                        "replaces": replaces,
                        "writes": stored,
                    }
                )
                return
            except DuplicateKeyError:
                continue  # that number is taken (an earlier call, or a concurrent one): next
        raise RuntimeError(
            f"over {MAX_WRITE_SETS} write sets on checkpoint {checkpoint_id} of {thread_id}"
        )

    @staticmethod
    def _known_writes(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> Known | None:
        """What this run holds of a checkpoint's writes: the newest checkpoint's, or those of
        one not put yet (kept for its put). None outside a run, or for an older checkpoint."""
        run = current_run()
        if run is None:
            return None
        newest = run.newest.get((thread_id, checkpoint_ns))
        if newest is not None and newest.document.get("checkpoint_id") == checkpoint_id:
            return newest
        if newest is not None and str(newest.document.get("checkpoint_id")) > checkpoint_id:
            return None  # an older checkpoint's writes: read from the database when asked
        return run.early.setdefault((thread_id, checkpoint_ns, checkpoint_id), Known({}))

    async def adelete_thread(self, thread_id: str) -> None:
        thread = {"thread_id": _identifier(thread_id, "thread_id")}
        for collection in (self._checkpoints, self._heads, self._write_sets, self._legacy_writes):
            await collection.delete_many(thread)
        run = current_run()
        if run is not None:
            run.newest = {k: v for k, v in run.newest.items() if k[0] != thread_id}
            run.early = {k: v for k, v in run.early.items() if k[0] != thread_id}
            run.heads = {k: v for k, v in run.heads.items() if k[0] != thread_id}

    # --- reads -------------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, checkpoint_ns = _thread_of(config)
        found = await self._stored(thread_id, checkpoint_ns, get_checkpoint_id(config))
        return None if found is None else self._tuple(*found)

    async def _stored(
        self, thread_id: str, checkpoint_ns: str, wanted: str | None
    ) -> tuple[Document, list[Document]] | None:
        """A checkpoint's document and its pending writes, still serialized: ``wanted``, or the
        thread's newest. Within a run, from what the run holds or read already, and the newest
        read is remembered."""
        run = current_run()
        current = None if run is None else run.newest.get((thread_id, checkpoint_ns))
        if current is not None and wanted in (None, current.document["checkpoint_id"]):
            return current.document, current.writes
        found_none = run is not None and run.heads.get((thread_id, checkpoint_ns), 1) is None
        if found_none and wanted is None:
            return None  # the run found no head, and has put no checkpoint since
        if wanted is None:
            document = await self._heads.find_one({"_id": key_of(thread_id, checkpoint_ns)})
            if run is not None:
                run.heads[(thread_id, checkpoint_ns)] = document
            if document is not None and "checkpoint" not in document:
                # A head of the point-read saver: the newest id only.
                document = await self._checkpoints.find_one(
                    {"_id": key_of(thread_id, checkpoint_ns, str(document["checkpoint_id"]))}
                )
        else:
            document = await self._by_id(thread_id, checkpoint_ns, _identifier(wanted, "id"))
        if document is None:
            return None
        document.pop("_id", None)
        writes = await self._writes_of(document)
        if run is not None and wanted is None:
            run.newest[(thread_id, checkpoint_ns)] = Known(document, writes)
        return document, writes

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # Not on a run's path (history, tools): a query by fields is fine here. What a run
        # holds is stored first, so the history is whole.
        run = current_run()
        if run is not None:
            await store_held(run)
        query: Document = {}
        if config is not None:
            configurable = config["configurable"]
            query["thread_id"] = _identifier(configurable["thread_id"], "thread_id")
            if "checkpoint_ns" in configurable:
                query["checkpoint_ns"] = _identifier(configurable["checkpoint_ns"], "ns")
            if get_checkpoint_id(config) is not None:
                query["checkpoint_id"] = _identifier(get_checkpoint_id(config), "checkpoint_id")
        before_id = get_checkpoint_id(before) if before is not None else None
        found: dict[tuple[str, str, str], Document] = {}
        for collection in (self._checkpoints, self._heads):
            async for d in collection.find(query):
                if "checkpoint" in d:  # heads of the point-read saver hold an id only
                    found[(d["thread_id"], d["checkpoint_ns"], str(d["checkpoint_id"]))] = d
        documents = sorted(found.values(), key=lambda d: str(d["checkpoint_id"]), reverse=True)
        emitted = 0
        for document in documents:
            if before_id is not None and str(document["checkpoint_id"]) >= before_id:
                continue
            metadata = loads_metadata(self.serde, document["metadata"])
            if filter and any(metadata.get(k) != v for k, v in filter.items()):
                continue
            if limit is not None and emitted >= limit:
                return
            document.pop("_id", None)
            document.pop("interlock", None)
            writes = await self._writes_of(document)
            emitted += 1
            yield self._tuple(document, writes)

    async def _by_id(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> Document | None:
        """A given checkpoint: archived, or the newest, which only its head holds."""
        archived = await self._checkpoints.find_one(
            {"_id": key_of(thread_id, checkpoint_ns, checkpoint_id)}
        )
        if archived is not None:
            return archived
        head = await self._heads.find_one({"_id": key_of(thread_id, checkpoint_ns)})
        if head is not None and head.get("checkpoint_id") == checkpoint_id and "checkpoint" in head:
            return head
        return None

    async def _writes_of(self, document: Document) -> list[Document]:
        """A checkpoint's pending writes, merged in call order: those its document holds (a head
        that says they are all, ``writes_complete``, is not looked past), then its write sets."""
        merged: list[Document] = list(document.get("writes") or [])
        if document.get("writes_complete"):
            return merged
        ids = (document["thread_id"], document["checkpoint_ns"], document["checkpoint_id"])
        for number in range(MAX_WRITE_SETS):
            found = await self._write_sets.find_one({"_id": key_of(*ids, number)})
            if found is None:
                return merged
            if "writes" in found:
                merged = _merged(merged, found["writes"], replaces=bool(found.get("replaces")))
            else:  # a set of the point-read saver: the ids of its documents
                for key in found["keys"]:
                    legacy = await self._legacy_writes.find_one({"_id": key})
                    if legacy is not None:
                        merged = _merged(merged, [legacy], replaces=True)
        return merged

    def _tuple(self, document: Document, writes: list[Document]) -> CheckpointTuple:
        thread = {"thread_id": document["thread_id"], "checkpoint_ns": document["checkpoint_ns"]}
        parent = document.get("parent_checkpoint_id")
        return CheckpointTuple(
            {"configurable": {**thread, "checkpoint_id": document["checkpoint_id"]}},
            self.serde.loads_typed(loaded_typed(document["type"], document["checkpoint"])),
            loads_metadata(self.serde, document["metadata"]),
            {"configurable": {**thread, "checkpoint_id": parent}} if parent else None,
            [
                (
                    w["task_id"],
                    w["channel"],
                    self.serde.loads_typed(loaded_typed(w["type"], w["value"])),
                )
                # Ordered as LangGraph's Postgres saver orders them: concurrent calls leave no
                # order of their own.
                for w in sorted(writes, key=lambda w: (w["task_path"], w["task_id"], w["idx"]))
            ],
        )

    # LangGraph runs Interlock's graphs asynchronously; the blocking API is not offered.
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError("AsyncMongoSaver is async only: use aget_tuple")


def _merged(earlier: list[Document], writes: list[Document], *, replaces: bool) -> list[Document]:
    """``earlier`` with ``writes`` added: a write of a (task, index) already there replaces it
    only when its call wrote special channels alone, as LangGraph's savers do."""
    merged = {(w["task_id"], w["idx"]): w for w in earlier}
    for write in writes:
        key = (write["task_id"], write["idx"])
        if replaces or key not in merged:
            merged[key] = {k: v for k, v in write.items() if k != "_id"}
    return list(merged.values())


def _replaceable(old: Document | None, head: Document) -> bool:
    """Is ``old`` a checkpoint that ``head`` replaces (so to archive)? Not a head of the
    point-read saver (no checkpoint in it), nor the same checkpoint written again."""
    return old is not None and "checkpoint" in old and old["checkpoint_id"] != head["checkpoint_id"]


def _same(replaced: Document | None, read: Document | None) -> bool:
    if replaced is None or read is None:
        return False
    return {k: v for k, v in replaced.items() if k != "_id"} == {
        k: v for k, v in read.items() if k != "_id"
    }


async def _together(first: Awaitable[Any], second: Awaitable[Any]) -> tuple[Any, Any]:
    """Both at once; each finishes before the first failure is raised."""
    results = await asyncio.gather(first, second, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results[0], results[1]
