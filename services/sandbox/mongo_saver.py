"""LangGraph's MongoDB checkpointer, with its point reads made cheap on FerretDB.

``MongoDBSaver.get_tuple`` asks for the newest checkpoint of a thread with a server-side sort
(``sort=checkpoint_id desc, limit=1``), even when it names the checkpoint. FerretDB does not push
a sorted query's filter down to its backend: it reads the whole collection, every time (600 ms
at a few thousand checkpoints, growing with every execution ever run). The sandbox reads a
thread's latest checkpoint at least twice per run. Here the read filters only (pushed down to
an index on every server), takes the newest id from a projection of the thread's checkpoint
ids, and fetches that one document: the same answer, in two indexed point reads on MongoDB and
FerretDB alike.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.mongodb import MongoDBSaver
from langgraph.checkpoint.mongodb.utils import loads_metadata


def _identifier(value: Any, name: str) -> str:
    # Identifiers go into query documents: anything but a string could be an operator.
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value


class PointReadMongoDBSaver(MongoDBSaver):
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread = {
            "thread_id": _identifier(configurable["thread_id"], "thread_id"),
            "checkpoint_ns": _identifier(configurable.get("checkpoint_ns", ""), "checkpoint_ns"),
        }
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
        checkpoint = self.serde.loads_typed((doc["type"], doc["checkpoint"]))
        pending_writes = [
            (w["task_id"], w["channel"], self.serde.loads_typed((w["type"], w["value"])))
            for w in self.writes_collection.find(key)
        ]
        parent = doc.get("parent_checkpoint_id")
        return CheckpointTuple(
            {"configurable": key},
            checkpoint,
            loads_metadata(self.serde, doc["metadata"]),
            {"configurable": {**thread, "checkpoint_id": parent}} if parent else None,
            pending_writes,
        )
