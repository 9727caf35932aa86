"""Loading agents: each agent's graph imported and built once per process, from the registry's
reference (shared/agents.py: a module or a project file, with its import paths), as a compiled
graph, a StateGraph or a factory. An agent that fails is reported, and the others still serve."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from interlock.sdk import PolicyError
from services.sandbox.fingerprint import agent_fingerprint, legacy_fingerprint
from services.sandbox.reviews import tool_rules
from services.sandbox.tools import make_tools_durable
from shared.agents import AgentRegistry, AgentSpec
from shared.domain.versions import AgentVersion
from shared.events import ToolRule
from shared.langgraph_project import resolve_factory

Graph = Pregel[Any, Any, Any, Any]


class AgentNotLoadable(Exception):
    pass


@dataclass(frozen=True)
class LoadedAgent:
    spec: AgentSpec
    graph: Graph
    fingerprint: str
    tools: dict[str, ToolRule]
    legacy_fingerprint: str | None = None
    """The same code as the previous release fingerprinted it (services/sandbox/fingerprint.py):
    its suspensions resume."""

    @property
    def version(self) -> AgentVersion:
        legacy = [self.legacy_fingerprint] if self.legacy_fingerprint else []
        return AgentVersion(
            agent=self.spec.name,
            fingerprint=self.fingerprint,
            compatible_with=[*self.spec.compatible_with, *legacy],
            input_keys=input_keys_of(self.graph),
        )


def input_keys_of(graph: Graph) -> list[str] | None:
    """The keys of a StateGraph's input schema (what ``graph.invoke({...})`` may set), or None
    for a graph that has no builder to ask (the functional API's)."""
    builder = getattr(graph, "builder", None)
    schemas = getattr(builder, "schemas", None)
    input_schema = getattr(builder, "input_schema", None)
    if not isinstance(schemas, dict) or input_schema not in schemas:
        return None
    return sorted(str(key) for key in schemas[input_schema])


class GraphCache:
    """Imports and compiles each agent's graph once per process. An agent that cannot be loaded
    is remembered with the reason: its executions fail with it, the others run."""

    def __init__(
        self,
        registry: AgentRegistry,
        checkpointer: BaseCheckpointSaver[Any],
        store: BaseStore | None = None,
    ) -> None:
        self._registry = registry
        self._checkpointer = checkpointer
        self._store = store
        self._agents: dict[str, LoadedAgent] = {}
        self.unloadable: dict[str, str] = {}
        """Agents that failed to load, with why (logged and counted at start-up)."""

    def get(self, agent: str) -> LoadedAgent:
        loaded = self._agents.get(agent)
        if loaded is None:
            loaded = self._load(agent)
            self._agents[agent] = loaded
        return loaded

    def load_all(self) -> list[LoadedAgent]:
        """Every agent that loads; the others are in ``unloadable`` (one broken agent does not
        keep the sandbox, and the agents beside it, from serving)."""
        loaded = []
        for spec in self._registry.all():
            try:
                loaded.append(self.get(spec.name))
            except AgentNotLoadable as exc:
                self.unloadable[spec.name] = str(exc)
        return loaded

    def _build(self, spec: AgentSpec, target: Any) -> Any:
        """The graph ``target`` gives: itself (a compiled graph or a StateGraph), or what the
        factory returns. A factory takes the checkpointer (Interlock's form), a ``config``
        (LangGraph's graph factories) or nothing; an agent with a configured review policy
        must take it (a policy silently ignored would run gated tools unreviewed)."""
        if isinstance(target, Pregel | StateGraph):
            if spec.policy is not None:
                raise AgentNotLoadable(
                    f"agent {spec.name!r} has a review policy but {spec.factory} is a graph, not"
                    " a factory taking 'policy'; it would run its tools unreviewed"
                )
            return target
        if not callable(target):
            raise AgentNotLoadable(f"{spec.factory} is a {type(target).__name__}, not a graph")
        parameters = _parameters(target)
        if spec.policy is not None and "policy" not in parameters:
            raise AgentNotLoadable(
                f"agent {spec.name!r} has a review policy but {spec.factory} takes no 'policy'"
                " argument; it would run its tools unreviewed"
            )
        try:
            if spec.policy is not None:
                return target(self._checkpointer, policy=spec.policy)
            if "config" in parameters and "checkpointer" not in parameters:
                return target({"configurable": {}})
            if not parameters:
                return target()
            return target(self._checkpointer)
        except PolicyError as exc:
            raise AgentNotLoadable(str(exc)) from exc
        except Exception as exc:  # the agent's own code: its failure is the agent's, reported
            raise AgentNotLoadable(f"{spec.factory} raised {type(exc).__name__}: {exc}") from exc

    def _load(self, agent: str) -> LoadedAgent:
        spec = self._registry.get(agent)
        if spec is None:
            raise AgentNotLoadable(f"agent {agent!r} is not registered in this sandbox")
        for name, value in self._registry.env.items():
            os.environ.setdefault(name, value)
        target = import_target(spec)
        built = self._build(spec, target)
        if isinstance(built, StateGraph):
            built = built.compile(checkpointer=self._checkpointer)
        if not isinstance(built, Pregel):
            raise AgentNotLoadable(f"{spec.factory} returned {type(built).__name__}, not a graph")
        # The sandbox owns persistence: whatever the factory did, checkpoints go through the
        # guarded saver, and tools run by ToolNode / create_agent become durable steps.
        built.checkpointer = self._checkpointer
        if self._store is not None:
            # And the store is the workspace's memory (services/sandbox/agent_memory.py): a
            # graph compiled with LangGraph's InMemoryStore, as its docs write it, would forget
            # across processes and share across workspaces.
            built.store = self._store
        make_tools_durable(built)
        fingerprint = agent_fingerprint(spec, built, target)
        legacy = legacy_fingerprint(spec, built)
        return LoadedAgent(
            spec, built, fingerprint, tool_rules(built), None if legacy == fingerprint else legacy
        )


def import_target(spec: AgentSpec) -> Any:
    """The attribute ``spec.factory`` names, imported from its module or its file (relative to
    the folder that declared it), with the agent's import paths in front."""
    for folder in reversed(spec.import_paths):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    target, attribute = resolve_factory(spec.folder or Path.cwd(), spec.factory)
    try:
        module = _import_file(target) if target.endswith(".py") else importlib.import_module(target)
        return getattr(module, attribute)
    except Exception as exc:  # a syntax error or a failing import in the agent's own code too
        raise AgentNotLoadable(
            f"cannot import {spec.factory}: {type(exc).__name__}: {exc}"
        ) from exc


def _import_file(path: str) -> Any:
    """A module loaded from its file, once, under a name derived from its path (two projects
    may each have an ``agent.py``)."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    name = f"interlock_project_{digest}_{Path(path).stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _parameters(factory: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return {}
