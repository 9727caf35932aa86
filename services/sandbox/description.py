"""How an agent's graph looks, described where it is loaded, for LangGraph's assistants routes
(``getGraph``, ``getSchemas``, ``getSubgraphs``), which the gateway answers from the store
without importing agent code (shared/domain/descriptions.py). Each is what LangGraph's own API
would make of the same compiled graph: its drawable graph at each ``xray`` depth, its input,
output, state, config and context JSON schemas, and every subgraph's.

A part LangGraph cannot make for a graph is left empty (null), as LangGraph's server answers
it; nothing here may keep an agent from loading."""

from __future__ import annotations

import json
import warnings
from typing import Any

import structlog
from langgraph.channels.base import BaseChannel
from langgraph.pregel import Pregel
from pydantic import create_model

from shared.domain.descriptions import AgentDescription

log = structlog.get_logger(__name__)

Graph = Pregel[Any, Any, Any, Any]

MAX_XRAY = 10
"""Deepest subgraph level drawn apart from ``xray=True`` (which draws every level)."""
MAX_DESCRIPTION_CHARS = 4 * 1024 * 1024
"""A description larger than this is not published (the routes then say the agent is not
described): far beyond any graph drawn by hand, well within a store document."""
MANAGED_CONFIG_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns"})
"""Keys of a run's configuration that the server sets, never a client: left out of the config
schema, as LangGraph's server leaves them out."""


def describe(graph: Graph, name: str) -> AgentDescription | None:
    """``graph`` (the agent ``name``) described; None when the description is too large."""
    with structlog.contextvars.bound_contextvars(agent=name):
        described: AgentDescription | None = _quietly(lambda: _described(graph, name), None)
        return described


def _described(graph: Graph, name: str) -> AgentDescription | None:
    # Named after the agent, as LangGraph's server names a graph after its id: generated
    # schema titles read "<agent>_state", not "LangGraphState".
    named = graph.copy({"name": name})
    subgraphs = {
        namespace: _schemas(subgraph)
        for namespace, subgraph in _quietly(lambda: list(graph.get_subgraphs(recurse=True)), [])
    }
    description = AgentDescription(
        graphs=_drawings(named),
        schemas=json.dumps(_schemas(named)),
        subgraphs=json.dumps(subgraphs),
    )
    if description.size() > MAX_DESCRIPTION_CHARS:
        log.warning("agent.description_too_large", chars=description.size())
        return None
    return description


def _drawings(graph: Graph) -> list[str]:
    """The drawable graph as JSON text, by xray depth, up to the depth that draws every
    subgraph (a deeper one draws the same)."""
    drawings: list[str] = []
    for xray in range(MAX_XRAY + 1):
        drawn = _quietly(lambda xray=xray: _drawable(graph, xray), None)
        if drawn is None or (drawings and drawn == drawings[-1]):
            return drawings
        drawings.append(drawn)
    deepest = _quietly(lambda: _drawable(graph, True), None)
    if deepest is not None and deepest != drawings[-1]:
        drawings.append(deepest)
    return drawings


def _drawable(graph: Graph, xray: bool | int) -> str:
    drawn = graph.get_graph(xray=xray).to_json()
    for node in drawn.get("nodes", []):
        data = node.get("data")
        # LangGraph's server leaves out the class path of each node's runnable.
        if isinstance(data, dict):
            data.pop("id", None)
    return json.dumps(drawn)


def _schemas(graph: Any) -> dict[str, Any]:
    if not isinstance(graph, Pregel):
        return dict.fromkeys(
            ("input_schema", "output_schema", "state_schema", "config_schema", "context_schema")
        )
    context = _quietly(graph.get_context_jsonschema, None)
    return {
        "input_schema": _quietly(graph.get_input_jsonschema, None),
        "output_schema": _quietly(graph.get_output_jsonschema, None),
        "state_schema": _quietly(lambda: _state_schema(graph), None),
        "config_schema": _config_schema(context),
        "context_schema": context,
    }


def _state_schema(graph: Graph) -> dict[str, Any]:
    """The graph's state: each channel it streams, typed as what a node may write to it (an
    update of a reducer's channel, such as one message added to ``messages``)."""
    fields: dict[str, Any] = {}
    for key in graph.stream_channels_list:
        channel = graph.channels[key]
        kind = channel.UpdateType if isinstance(channel, BaseChannel) else Any
        try:
            create_model(key, value=(kind, None)).model_json_schema()
        except Exception:  # a type pydantic cannot describe: any value
            kind = Any
        fields[key] = (kind, None)
    model = create_model(graph.get_name("State"), **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return schema


def _config_schema(context: dict[str, Any] | None) -> dict[str, Any]:
    """What LangGraph's server shows as the configurable part of a run's config: since
    LangGraph 0.6 the context schema, without the keys the server sets; ``{}`` without one."""
    if not context:
        return {}
    properties = {
        key: value
        for key, value in context.get("properties", {}).items()
        if key not in MANAGED_CONFIG_KEYS and not key.startswith("__")
    }
    return {**context, "properties": properties} if "properties" in context else dict(context)


def _quietly(make: Any, default: Any) -> Any:
    """What ``make()`` returns, or ``default`` when LangGraph cannot make it for this graph
    (logged: the agent still loads and runs)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecations inside LangGraph's own helpers
            return make()
    except Exception as exc:  # the agent's own types and code: never fatal here
        log.warning("agent.description_part_failed", error=f"{type(exc).__name__}: {exc}")
        return default
