"""How an agent's graph looks, as the sandboxes that load it describe it: the drawable graph and
the JSON schemas LangGraph's assistants routes answer (``getGraph``, ``getSchemas``,
``getSubgraphs``). The gateway never imports agent code, so the sandboxes publish this beside
the agent's version (services/sandbox/description.py) and the gateway serves it from the store.

The JSON is kept as text: JSON schemas have keys such as ``$defs`` and ``$ref``, which no
MongoDB-compatible store accepts as a document key (FerretDB refuses any key that starts with
``$`` or holds a ``.``), and the store has no reason to look inside."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

NAMESPACE_SEPARATOR = "|"
"""Between the levels of a subgraph's namespace (``parent|child``), as LangGraph writes it."""
SCHEMA_KEYS = ("input_schema", "output_schema", "state_schema", "config_schema", "context_schema")


class AgentDescription(BaseModel):
    """An agent's graph as LangGraph's server draws and describes it."""

    model_config = ConfigDict(frozen=True)

    graphs: list[str] = Field(default_factory=list)
    """The drawable graph, as JSON text, by ``xray`` depth: ``graphs[0]`` draws each subgraph
    as one node, ``graphs[n]`` draws subgraphs ``n`` levels deep, and the last draws all of
    them (``xray=True``). Empty when the graph cannot be drawn."""
    schemas: str = "{}"
    """JSON text: the graph's ``input_schema``, ``output_schema``, ``state_schema``,
    ``config_schema`` and ``context_schema`` (each null when it has none)."""
    subgraphs: str = "{}"
    """JSON text: the schemas of every subgraph, at every depth, by namespace, in the order
    LangGraph lists them (each parent before its children)."""

    def graph(self, xray: bool | int) -> dict[str, Any] | None:
        """The drawable graph at ``xray`` (False, True, or a depth of 1 or more); None when the
        graph cannot be drawn."""
        if not self.graphs:
            return None
        depth = len(self.graphs) - 1 if xray is True else min(int(xray), len(self.graphs) - 1)
        drawn: dict[str, Any] = json.loads(self.graphs[depth])
        return drawn

    def schemas_of(self, graph_id: str) -> dict[str, Any]:
        stored: dict[str, Any] = json.loads(self.schemas)
        return {"graph_id": graph_id, **{key: stored.get(key) for key in SCHEMA_KEYS}}

    def subgraphs_of(self, namespace: str | None, *, recurse: bool) -> dict[str, Any]:
        """The subgraphs' schemas by namespace, as LangGraph's ``get_subgraphs`` lists them:
        without a namespace, the graph's own subgraphs (all of their descendants too with
        ``recurse``); with one, only the subgraph at exactly that namespace, which may be a
        nested one only with ``recurse``."""
        every: dict[str, Any] = json.loads(self.subgraphs)
        if namespace is None:
            return {ns: s for ns, s in every.items() if recurse or NAMESPACE_SEPARATOR not in ns}
        if namespace not in every or (NAMESPACE_SEPARATOR in namespace and not recurse):
            return {}
        return {namespace: every[namespace]}

    def size(self) -> int:
        """Characters of JSON text held."""
        return sum(map(len, self.graphs)) + len(self.schemas) + len(self.subgraphs)
