"""The ``events`` and ``debug`` stream modes, made from what a run records anyway (its progress
entries: node updates, tokens, whole messages), so that asking for them costs a run nothing.
Pure.

LangGraph makes ``events`` with ``astream_events`` (a callback for every runnable) and ``debug``
from every checkpoint and task. Interlock's sandbox records neither (checkpoints are written
when a run stops, and recording every runnable's inputs and outputs would cost every run), so
these are LangGraph's events at node level, as a run's nodes report them:

- ``events``: the graph's ``on_chain_start`` (its input) and ``on_chain_end`` (its output); per
  node ``on_chain_start`` when it is first heard of (its first token, message or update),
  ``on_chat_model_stream`` per batch of its streamed tokens, then ``on_chain_stream`` and
  ``on_chain_end`` with its update. Each carries ``metadata.langgraph_node`` (what Agent Inbox
  reads) and ``parent_ids``; node inputs are not recorded (``data`` has no ``input``).
- ``debug``: per node a ``task`` (its input not recorded) and a ``task_result`` with its update;
  no ``checkpoint`` events.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.gateway.langgraph.run_messages import MESSAGE_FIELDS, Emitted


@dataclass
class NodeTrace:
    """The ``events`` and ``debug`` events of one run's nodes."""

    modes: frozenset[str]
    run_id: str
    graph_id: str
    metadata: Callable[[str | None, str], dict[str, Any]]
    open_nodes: dict[tuple[str, str | None], str] = field(default_factory=dict)
    """(namespace, node) -> the id of the node's task, from its first sign to its update."""
    steps: dict[str, int] = field(default_factory=dict)
    """Namespace -> node steps seen in it (each task's ``step``)."""
    count: int = 0

    @property
    def wanted(self) -> bool:
        return bool(self.modes & {"events", "debug"})

    def graph_start(self, values: dict[str, Any]) -> Emitted:
        if "events" not in self.modes:
            return []
        return [
            (
                "events",
                self._event(
                    "on_chain_start", self.graph_id, self.run_id, {}, {"input": values}, root=True
                ),
            )
        ]

    def graph_end(self, values: dict[str, Any]) -> Emitted:
        if "events" not in self.modes:
            return []
        return [
            (
                "events",
                self._event(
                    "on_chain_end", self.graph_id, self.run_id, {}, {"output": values}, root=True
                ),
            )
        ]

    def heard(self, ns: str, node: str | None, suffix: str) -> Emitted:
        """A node is under way (its first entry): its start, once."""
        if (ns, node) in self.open_nodes:
            return []
        self.count += 1
        task_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.run_id}/{ns}/{node}/{self.count}"))
        self.open_nodes[(ns, node)] = task_id
        self.steps[ns] = self.steps.get(ns, 0) + 1
        emitted: Emitted = []
        if "events" in self.modes:
            start = self._event("on_chain_start", node, task_id, self.metadata(node, ns), {})
            emitted.append((f"events{suffix}", start))
        if "debug" in self.modes:
            payload: dict[str, Any] = {"id": task_id, "name": node, "input": None, "triggers": []}
            emitted.append((f"debug{suffix}", self._debug("task", ns, payload)))
        return emitted

    def tokens(self, ns: str, node: str | None, data: dict[str, Any], suffix: str) -> Emitted:
        emitted = self.heard(ns, node, suffix)
        if "events" in self.modes:
            chunk = {
                **MESSAGE_FIELDS,
                "type": "AIMessageChunk",
                "content": str(data.get("text", "")),
                "id": data.get("id"),
                "tool_call_chunks": data.get("tool_call_chunks") or [],
            }
            task_id = self.open_nodes[(ns, node)]
            event = self._event(
                "on_chat_model_stream", node, task_id, self.metadata(node, ns), {"chunk": chunk}
            )
            emitted.append((f"events{suffix}", event))
        return emitted

    def updated(self, ns: str, node: str | None, update: Any, suffix: str) -> Emitted:
        """The node finished a step with ``update``."""
        emitted = self.heard(ns, node, suffix)
        task_id = self.open_nodes.pop((ns, node))
        metadata = self.metadata(node, ns)
        if "events" in self.modes:
            emitted.append(
                (
                    f"events{suffix}",
                    self._event("on_chain_stream", node, task_id, metadata, {"chunk": update}),
                )
            )
            emitted.append(
                (
                    f"events{suffix}",
                    self._event("on_chain_end", node, task_id, metadata, {"output": update}),
                )
            )
        if "debug" in self.modes:
            payload = {
                "id": task_id,
                "name": node,
                "error": None,
                "result": update,
                "interrupts": [],
            }
            emitted.append((f"debug{suffix}", self._debug("task_result", ns, payload)))
        return emitted

    def _event(
        self,
        kind: str,
        name: str | None,
        run_id: str,
        metadata: dict[str, Any],
        data: dict[str, Any],
        *,
        root: bool = False,
    ) -> dict[str, Any]:
        return {
            "event": kind,
            "name": name,
            "run_id": run_id,
            "tags": [],
            "metadata": metadata,
            "data": data,
            "parent_ids": [] if root else [self.run_id],
        }

    def _debug(self, kind: str, ns: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "step": self.steps.get(ns, 0),
            "timestamp": datetime.now(UTC).isoformat(),
            "type": kind,
            "payload": payload,
        }
