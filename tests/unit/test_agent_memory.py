"""The store graphs run with (services/sandbox/agent_memory.py), through the sandbox's runner on
the in-memory store: a fact put in one execution is read in another of the workspace and in no
other workspace; the put before an interrupt is not made again when the node runs again on
resume (a durable step); the sync methods work from a sync node; a delete deletes; a store used
outside a run raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from services.sandbox.agent_memory import AgentMemory, NoTenant
from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.loading import GraphCache
from services.sandbox.runner import AgentRunner, Completed, Suspended
from shared.agents import load_registry
from shared.events import AgentInput, DispatchKind, ExecutionDispatched, ResumeInstruction
from shared.store.memories import Tenant
from shared.store.memory import InMemoryStore

REGISTRY = """
[agents.memory-notes]
factory = "agents.memory_notes:build_graph"
[agents.memory-notes-sync]
factory = "agents.memory_notes:build_sync_graph"
"""


def runner(tmp_path: Path, store: InMemoryStore) -> AgentRunner:
    agents = tmp_path / "agents.toml"
    agents.write_text(REGISTRY)
    graphs = GraphCache(
        load_registry(agents),
        GuardedSaver(InMemorySaver(), max_checkpoint_bytes=1_000_000),
        AgentMemory(store.memories),
    )
    return AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=30,
        max_step_result_bytes=100_000,
        progress=store.progress,
    )


def start(execution: str, message: str, agent: str, workspace: str = "w") -> ExecutionDispatched:
    return ExecutionDispatched(
        execution_id=execution,
        agent=agent,
        epoch=1,
        kind=DispatchKind.START,
        input=AgentInput(message=message),
        project_id="p",
        workspace_id=workspace,
    )


def approve(execution: str, agent: str, suspended: Suspended) -> ExecutionDispatched:
    return ExecutionDispatched(
        execution_id=execution,
        agent=agent,
        epoch=2,
        kind=DispatchKind.RESUME,
        resume=ResumeInstruction(
            suspension_id=1,
            interrupt_ids=[suspended.interrupts[0].interrupt_id],
            decision="approve",
            agent_fingerprint=suspended.agent_fingerprint,
        ),
        project_id="p",
        workspace_id="w",
    )


def last_reply(outcome: object) -> str:
    assert isinstance(outcome, Completed), outcome
    return str(outcome.result["messages"][-1]["content"])


@pytest.mark.parametrize("agent", ["memory-notes", "memory-notes-sync"])
async def test_a_fact_is_remembered_across_executions_once_and_only_in_its_workspace(
    tmp_path: Path, agent: str
) -> None:
    store = InMemoryStore()
    run = runner(tmp_path, store)
    suspended, _ = await run.run(start("e-1", "remember the sky is green", agent))
    assert isinstance(suspended, Suspended), suspended
    put = await store.memories.get(Tenant("p", "w"), ("facts",), "latest")
    assert put is not None and put.value == {"text": "the sky is green"}

    resumed, _ = await run.run(approve("e-1", agent, suspended))
    assert last_reply(resumed) == "noted 'the sky is green'; reviewer said approve"
    # The node ran again from its first line on resume; its put was served from the step cache.
    after = await store.memories.get(Tenant("p", "w"), ("facts",), "latest")
    assert after == put
    assert [s.name for s in (await store.steps.load("e-1")).values()] == ["store.put"]

    elsewhere, _ = await run.run(start("e-2", "what do you know?", agent))
    assert last_reply(elsewhere) == "I remember: the sky is green"
    other_workspace, _ = await run.run(start("e-3", "what do you know?", agent, workspace="w2"))
    assert last_reply(other_workspace) == "I remember nothing"


async def test_a_delete_deletes(tmp_path: Path) -> None:
    store = InMemoryStore()
    run = runner(tmp_path, store)
    suspended, _ = await run.run(start("e-1", "remember tea", "memory-notes"))
    assert isinstance(suspended, Suspended)
    assert last_reply((await run.run(start("e-2", "forget", "memory-notes")))[0]) == "forgotten"
    assert await store.memories.get(Tenant("p", "w"), ("facts",), "latest") is None


async def test_the_store_outside_a_run_has_no_workspace_to_use() -> None:
    memory = AgentMemory(InMemoryStore().memories)
    with pytest.raises(NoTenant):
        await memory.aget(("facts",), "latest")
