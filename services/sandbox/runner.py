"""LangGraph adapter: runs or resumes one execution's graph from its checkpoint.

What to do with a dispatch is read from the checkpoint, never assumed, so a re-sent or stale
command cannot run the agent twice:

- start, no checkpoint yet: run the graph on the input;
- start or resume, the graph already waits on an interrupt that this command does not answer:
  report that suspension again (it was reported before, or the decision was already applied);
- resume, the graph waits on exactly the interrupts this command answers: resume them;
- the graph finished: report the result again;
- a checkpoint mid-run (a crashed attempt): continue from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.types import Command, StateSnapshot
from pymongo.errors import PyMongoError

from services.sandbox.jsonable import to_jsonable
from shared.agents import AgentRegistry
from shared.events import DispatchKind, ExecutionDispatched, PendingInterrupt


@dataclass(frozen=True)
class Suspended:
    interrupts: list[PendingInterrupt]


@dataclass(frozen=True)
class Completed:
    result: Any


@dataclass(frozen=True)
class Failed:
    error_type: str
    message: str


RunOutcome = Suspended | Completed | Failed


class AgentNotLoadable(Exception):
    pass


class GraphCache:
    """Imports and compiles each agent's graph once per process."""

    def __init__(self, registry: AgentRegistry, checkpointer: BaseCheckpointSaver[Any]) -> None:
        self._registry = registry
        self._checkpointer = checkpointer
        self._graphs: dict[str, Pregel[Any, Any, Any, Any]] = {}

    def get(self, agent: str) -> Pregel[Any, Any, Any, Any]:
        graph = self._graphs.get(agent)
        if graph is None:
            graph = self._load(agent)
            self._graphs[agent] = graph
        return graph

    def _load(self, agent: str) -> Pregel[Any, Any, Any, Any]:
        spec = self._registry.get(agent)
        if spec is None:
            raise AgentNotLoadable(f"agent {agent!r} is not registered in this sandbox")
        module_name, attribute = spec.factory.split(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise AgentNotLoadable(f"cannot import {spec.factory}: {exc}") from exc
        built = factory(self._checkpointer)
        if isinstance(built, StateGraph):
            built = built.compile(checkpointer=self._checkpointer)
        if not isinstance(built, Pregel):
            raise AgentNotLoadable(f"{spec.factory} returned {type(built).__name__}, not a graph")
        if built.checkpointer is None:
            built.checkpointer = self._checkpointer
        return built


def pending_interrupts(snapshot: StateSnapshot) -> list[PendingInterrupt]:
    return [
        PendingInterrupt(interrupt_id=i.id, value=to_jsonable(i.value)) for i in snapshot.interrupts
    ]


class AgentRunner:
    def __init__(self, graphs: GraphCache) -> None:
        self._graphs = graphs

    async def run(self, dispatch: ExecutionDispatched) -> RunOutcome:
        try:
            graph = self._graphs.get(dispatch.agent)
        except AgentNotLoadable as exc:
            return Failed("AgentNotLoadable", str(exc))
        config: Any = {"configurable": {"thread_id": dispatch.execution_id}}
        snapshot = await graph.aget_state(config)
        payload = self._next_input(dispatch, snapshot)
        if isinstance(payload, Suspended | Completed | Failed):
            return payload
        try:
            await graph.ainvoke(payload, config, durability="sync")
        except Exception as exc:
            if _is_infrastructure_error(exc):
                raise
            return Failed(type(exc).__name__, str(exc) or type(exc).__name__)
        return _outcome_of(await graph.aget_state(config))

    @staticmethod
    def _next_input(dispatch: ExecutionDispatched, snapshot: StateSnapshot) -> Any:
        has_checkpoint = snapshot.created_at is not None
        pending = [i.id for i in snapshot.interrupts]
        if dispatch.kind is DispatchKind.RESUME and dispatch.resume is not None:
            answers = dispatch.resume.interrupt_ids
            if pending and sorted(pending) == sorted(answers):
                value = dispatch.resume.resume_value()
                return Command(resume={interrupt_id: value for interrupt_id in pending})
        if not has_checkpoint:
            if dispatch.input is None:
                return Failed("NoCheckpoint", "resume dispatched but no checkpoint exists")
            return {"messages": [m.model_dump() for m in dispatch.input.as_messages()]}
        if pending or not snapshot.next:
            return _outcome_of(snapshot)
        return None  # continue a crashed attempt from its last checkpoint


def _outcome_of(snapshot: StateSnapshot) -> RunOutcome:
    if snapshot.interrupts:
        return Suspended(pending_interrupts(snapshot))
    if snapshot.next:
        # Stopped without an interrupt but with work left: only a bug in the graph does this.
        return Failed("Incomplete", f"graph stopped before {list(snapshot.next)} without interrupt")
    return Completed(to_jsonable(snapshot.values))


def _is_infrastructure_error(exc: BaseException) -> bool:
    """Errors of the checkpointer's database are retried; everything else is the agent's."""
    return isinstance(exc, PyMongoError)
