"""An agent's fingerprint: which version of its code a suspension was taken with.

A checkpoint is only meaningful to the code that wrote it: resuming it with a graph whose nodes,
edges or node code changed can replay steps in the wrong places. Each suspension records the
fingerprint of the agent that suspended, and a resume under another fingerprint is refused
unless the agent declares that version compatible (``compatible_with`` in the registry).

The automatic fingerprint hashes the graph's shape (node names, edges) and the source of the
module that holds the factory. Code imported from other modules is not covered: agents that
span several modules should set ``version`` in the registry and bump it on change.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from typing import Any

from langgraph.pregel import Pregel

from shared.agents import AgentSpec


def graph_shape(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    drawn = graph.get_graph()
    return {
        "nodes": sorted(drawn.nodes),
        "edges": sorted([e.source, e.target, e.conditional] for e in drawn.edges),
    }


def agent_fingerprint(spec: AgentSpec, graph: Pregel[Any, Any, Any, Any]) -> str:
    if spec.version:
        return spec.version
    module = sys.modules.get(spec.factory.split(":")[0])
    try:
        source = inspect.getsource(module) if module is not None else ""
    except (OSError, TypeError):  # no source on disk (e.g. compiled only): shape alone
        source = ""
    digest = hashlib.sha256()
    digest.update(json.dumps(graph_shape(graph), sort_keys=True).encode())
    digest.update(source.encode())
    if spec.policy is not None:  # a changed review policy changes what a resume may do
        digest.update(spec.policy.model_dump_json().encode())
    return digest.hexdigest()[:16]


def compatible(spec: AgentSpec, current: str, suspended_with: str | None) -> bool:
    """May a suspension taken under ``suspended_with`` resume under ``current``?"""
    return (
        suspended_with is None
        or suspended_with == current
        or suspended_with in spec.compatible_with
    )
