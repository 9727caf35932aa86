"""The ``events`` and ``debug`` stream modes, made from what a run records anyway (its progress
entries: node updates, tokens, whole messages), so that asking for them costs a run nothing.
Pure.

LangGraph makes ``events`` with ``astream_events`` (a callback for every runnable) and ``debug``
from every checkpoint and task. Interlock's sandbox records neither (checkpoints are written
when a run stops, and recording every runnable's inputs and outputs would cost every run), so
these are LangGraph's events as a run's nodes report them:

- ``events`` (never namespaced, a subgraph's included, as LangGraph sends them): the graph's
  ``on_chain_start`` (its input) and ``on_chain_end`` (its output); per node ``on_chain_start``
  when it is first heard of (its first token, message or update), its model's
  ``on_chat_model_start`` / ``on_chat_model_stream`` per batch of tokens / ``on_chat_model_end``
  and its tools' ``on_tool_start`` / ``on_tool_end`` as their messages arrive, then
  ``on_chain_stream`` and ``on_chain_end`` with its update. Each carries
  ``metadata.langgraph_node`` (what Agent Inbox reads) and ``parent_ids``; inputs are not
  recorded (``data`` has no ``input`` but the graph's).
- ``debug``: per node a ``task`` (its input not recorded: ``null``) and a ``task_result`` with
  its update; no ``checkpoint`` events.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.gateway.langgraph.run_messages import MESSAGE_FIELDS, Emitted, as_langchain

Suffix = str | None
"""A ``debug`` event name's namespace part, or None when the node's events are not streamed
(a subgraph's, without ``stream_subgraphs``)."""


@dataclass
class NodeTrace:
    """The ``events`` and ``debug`` events of one run's nodes."""

    modes: frozenset[str]
    run_id: str
    graph_id: str
    metadata: Callable[[str | None, str], dict[str, Any]]
    suffix_of: Callable[[str], Suffix]
    """The ``debug`` name's namespace part of a namespace's events (None: not streamed)."""
    open_nodes: dict[tuple[str, str | None], str] = field(default_factory=dict)
    """(namespace, node) -> the id of the node's task, from its first sign to its update."""
    streaming: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)
    """(namespace, node) -> its model's message streaming so far (``events``)."""
    steps: dict[str, int] = field(default_factory=dict)
    """Namespace -> node steps seen in it (each task's ``step``)."""
    count: int = 0

    @property
    def wanted(self) -> bool:
        return bool(self.modes & {"events", "debug"})

    def graph_start(self, values: dict[str, Any]) -> Emitted:
        if "events" not in self.modes:
            return []
        start = self._event("on_chain_start", self.graph_id, self.run_id, {}, {"input": values}, [])
        return [("events", start)]

    def graph_end(self, values: dict[str, Any]) -> Emitted:
        if "events" not in self.modes:
            return []
        end = self._event("on_chain_end", self.graph_id, self.run_id, {}, {"output": values}, [])
        return [("events", end)]

    def heard(self, ns: str, node: str | None) -> Emitted:
        """A node is under way (its first entry): its start, once, after the start of the nodes
        whose subgraph it runs in (its namespace names them: ``parent:<task>|child:<task>``)."""
        if (ns, node) in self.open_nodes:
            return []
        emitted: Emitted = []
        if ns:
            *outer, inside = ns.split("|")
            emitted.extend(self.heard("|".join(outer), inside.split(":")[0]))
        debug = self.suffix_of(ns)
        self.count += 1
        task_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.run_id}/{ns}/{node}/{self.count}"))
        self.open_nodes[(ns, node)] = task_id
        self.steps[ns] = self.steps.get(ns, 0) + 1
        if "events" in self.modes:
            metadata = self.metadata(node, ns)
            start = self._event("on_chain_start", node, task_id, metadata, {}, [self.run_id])
            emitted.append(("events", start))
        if "debug" in self.modes and debug is not None:
            payload: dict[str, Any] = {"id": task_id, "name": node, "input": None, "triggers": []}
            emitted.append((f"debug{debug}", self._debug("task", ns, payload)))
        return emitted

    def tokens(self, ns: str, node: str | None, data: dict[str, Any]) -> Emitted:
        """A batch of the node's model's streamed tokens."""
        emitted = self.heard(ns, node)
        if "events" not in self.modes:
            return emitted
        chunk = {
            **MESSAGE_FIELDS,
            "type": "AIMessageChunk",
            "content": str(data.get("text", "")),
            "id": data.get("id"),
            "tool_call_chunks": data.get("tool_call_chunks") or [],
        }
        so_far = self.streaming.get((ns, node))
        if so_far is None or so_far["id"] != chunk["id"]:
            emitted.extend(self._model_end(ns, node))
            self.streaming[(ns, node)] = {**chunk, "type": "ai"}
            emitted.append(self._inner("on_chat_model_start", "model", ns, node, chunk["id"], {}))
        else:
            so_far["content"] = str(so_far["content"]) + chunk["content"]
            so_far["tool_call_chunks"] = [*so_far["tool_call_chunks"], *chunk["tool_call_chunks"]]
        stream = {"chunk": chunk}
        emitted.append(self._inner("on_chat_model_stream", "model", ns, node, chunk["id"], stream))
        return emitted

    def message(self, ns: str, node: str | None, message: Any) -> Emitted:
        """A whole message the node produced: its model's answer, or a tool's result."""
        emitted = self.heard(ns, node)
        if "events" not in self.modes or not isinstance(message, dict):
            return emitted
        message = as_langchain(message)
        if message.get("type") == "tool":
            name, kinds = str(message.get("name")), ("on_tool_start", "on_tool_end")
        else:
            name, kinds = "model", ("on_chat_model_start", "on_chat_model_end")
        key = message.get("id")
        emitted.append(self._inner(kinds[0], name, ns, node, key, {}))
        emitted.append(self._inner(kinds[1], name, ns, node, key, {"output": message}))
        return emitted

    def updated(self, ns: str, node: str | None, update: Any) -> Emitted:
        """The node finished a step with ``update``."""
        emitted = self.heard(ns, node)
        debug = self.suffix_of(ns)
        emitted.extend(self._model_end(ns, node))
        task_id = self.open_nodes.pop((ns, node))
        metadata = self.metadata(node, ns)
        if "events" in self.modes:
            for kind, data in (
                ("on_chain_stream", {"chunk": update}),
                ("on_chain_end", {"output": update}),
            ):
                event = self._event(kind, node, task_id, metadata, data, [self.run_id])
                emitted.append(("events", event))
        if "debug" in self.modes and debug is not None:
            payload = {
                "id": task_id,
                "name": node,
                "error": None,
                "result": update,
                "interrupts": [],
            }
            emitted.append((f"debug{debug}", self._debug("task_result", ns, payload)))
        return emitted

    def _model_end(self, ns: str, node: str | None) -> Emitted:
        streamed = self.streaming.pop((ns, node), None)
        if streamed is None:
            return []
        output = {"output": streamed}
        return [self._inner("on_chat_model_end", "model", ns, node, streamed["id"], output)]

    def _inner(
        self,
        kind: str,
        name: str,
        ns: str,
        node: str | None,
        key: Any,
        data: dict[str, Any],
    ) -> tuple[str, Any]:
        """An event of a runnable inside a node (its model, a tool), its parent the node."""
        task_id = self.open_nodes[(ns, node)]
        run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{task_id}/{name}/{key}"))
        event = self._event(
            kind,
            name,
            run_id,
            self.metadata(node, ns),
            data,
            [
                self.run_id,
                task_id,
            ],
        )
        return ("events", event)

    def _event(
        self,
        kind: str,
        name: str | None,
        run_id: str,
        metadata: dict[str, Any],
        data: dict[str, Any],
        parents: list[str],
    ) -> dict[str, Any]:
        return {
            "event": kind,
            "name": name,
            "run_id": run_id,
            "tags": [],
            "metadata": metadata,
            "data": data,
            "parent_ids": parents,
        }

    def _debug(self, kind: str, ns: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "step": self.steps.get(ns, 0),
            "timestamp": datetime.now(UTC).isoformat(),
            "type": kind,
            "payload": payload,
        }
