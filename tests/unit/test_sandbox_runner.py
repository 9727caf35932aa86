"""The sandbox's runner without I/O: durable tools, fenced attempts, refused upgrades."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pymongo.errors import AutoReconnect
from structlog.testing import capture_logs

from interlock.sdk.runtime import StepRun, step_run
from services.orchestrator import state_machine as sm
from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.loading import GraphCache
from services.sandbox.runner import (
    MAX_SUSPENDED_VALUES_BYTES,
    AgentRunner,
    Completed,
    Failed,
    Refused,
    Suspended,
)
from services.sandbox.thread_base import copy_base
from services.sandbox.tools import make_tools_durable
from shared.agents import load_registry
from shared.domain.execution import ExecutionStatus
from shared.errors import Fenced
from shared.events import (
    AgentInput,
    ChatMessage,
    DispatchKind,
    ExecutionDispatched,
    ExecutionFailure,
    ReportOutcome,
    ResumeInstruction,
    ThreadTurn,
)
from shared.settings import CommonSettings
from shared.store.memory import InMemoryStore
from tests import factories as f

SCOPE = {"project_id": "p", "workspace_id": "w"}


async def test_a_tool_that_completed_is_not_run_again_when_its_node_runs_again() -> None:
    """Two tool calls in one ToolNode: the first succeeds, the second fails once. Re-running the
    node from the checkpoint serves the first from the cache (keyed by its tool call id)."""
    calls = {"send_email": 0, "flaky": 0}

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        calls["send_email"] += 1
        return f"sent to {to}"

    @tool
    def flaky(n: int) -> str:
        """Fails the first time."""
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise ConnectionError("upstream hiccup")
        return "ok"

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([send_email, flaky], handle_tool_errors=False))
    graph.add_edge(START, "tools")
    compiled = graph.compile(checkpointer=InMemorySaver())
    assert make_tools_durable(compiled) == 1
    assert make_tools_durable(compiled) == 0  # idempotent

    store = InMemoryStore()
    config: Any = {"configurable": {"thread_id": "exec-tools"}}
    request = AIMessage(
        content="",
        tool_calls=[
            {"name": "send_email", "args": {"to": "a@example.com"}, "id": "call-1"},
            {"name": "flaky", "args": {"n": 1}, "id": "call-2"},
        ],
    )
    first = await StepRun.open(execution_id="exec-tools", epoch=1, attempt=1, store=store.steps)
    with step_run(first), pytest.raises(ConnectionError):
        await compiled.ainvoke({"messages": [request]}, config, durability="sync")
    second = await StepRun.open(execution_id="exec-tools", epoch=1, attempt=2, store=store.steps)
    with step_run(second):
        result = await compiled.ainvoke(None, config, durability="sync")
    assert calls == {"send_email": 1, "flaky": 2}
    contents = sorted(m.content for m in result["messages"][1:])
    assert contents == ["ok", "sent to a@example.com"]
    assert {r.name for r in (await store.steps.load("exec-tools")).values()} == {
        "tool:send_email",
        "tool:flaky",
    }


def registry_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(
        '[agents.refund-approval]\nfactory = "agents.refund_approval:build_graph"\n' + extra
    )
    return path


def runner_for(
    tmp_path: Path, extra: str, store: InMemoryStore, saver: InMemorySaver | None = None
) -> AgentRunner:
    return runner_on(registry_file(tmp_path, extra), store, saver)


def runner_on(
    agents_file: Path, store: InMemoryStore, saver: InMemorySaver | None = None
) -> AgentRunner:
    graphs = GraphCache(
        load_registry(agents_file),
        GuardedSaver(saver or InMemorySaver(), max_checkpoint_bytes=1_000_000),
    )
    return AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=30,
        max_step_result_bytes=100_000,
        progress=store.progress,
    )


def start(epoch: int = 1) -> ExecutionDispatched:
    return ExecutionDispatched(
        execution_id="exec-r",
        agent="refund-approval",
        epoch=epoch,
        kind=DispatchKind.START,
        input=AgentInput(message="CLM-4821"),
        **SCOPE,
    )


def resume(interrupt_id: str, fingerprint: str | None) -> ExecutionDispatched:
    instruction = ResumeInstruction(
        suspension_id=1,
        interrupt_ids=[interrupt_id],
        decision="approve",
        agent_fingerprint=fingerprint,
    )
    return ExecutionDispatched(
        execution_id="exec-r",
        agent="refund-approval",
        epoch=2,
        kind=DispatchKind.RESUME,
        resume=instruction,
        **SCOPE,
    )


@pytest.mark.parametrize(
    ("now", "outcome"),
    [
        ('version = "v2"\n', Refused),
        ('version = "v2"\ncompatible_with = ["v1"]\n', Completed),
        ('version = "v1"\n', Completed),
    ],
)
async def test_resume_under_other_agent_code_is_refused_unless_declared_compatible(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    now: str,
    outcome: type,
) -> None:
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(tmp_path / "ledger.jsonl"))
    store = InMemoryStore()
    (tmp_path / "v1").mkdir()
    (tmp_path / "now").mkdir()
    # One database for both deployments: the upgraded sandbox reads the v1 checkpoint.
    saver = InMemorySaver()
    v1 = runner_for(tmp_path / "v1", 'version = "v1"\n', store, saver)
    suspended, _ = await v1.run(start())
    assert isinstance(suspended, Suspended) and suspended.agent_fingerprint == "v1"
    upgraded = runner_for(tmp_path / "now", now, store, saver)
    result, _ = await upgraded.run(resume(suspended.interrupts[0].interrupt_id, "v1"))
    assert isinstance(result, outcome), result
    if isinstance(result, Refused):
        assert "v1" in result.message and "v2" in result.message


async def test_a_release_that_cannot_load_the_agent_refuses_its_resume_and_fails_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken release must not end the reviews waiting on the agent: their resume is refused
    (the orchestrator suspends again, to be answered once a release loads it); a new run of it
    fails at once, with why."""
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(tmp_path / "ledger.jsonl"))
    store = InMemoryStore()
    saver = InMemorySaver()
    (tmp_path / "v1").mkdir()
    suspended, _ = await runner_for(tmp_path / "v1", "", store, saver).run(start())
    assert isinstance(suspended, Suspended)
    broken = tmp_path / "broken" / "agents.toml"
    broken.parent.mkdir()
    broken.write_text('[agents.refund-approval]\nfactory = "agents.no_such_module:build_graph"\n')
    runner = runner_on(broken, store, saver)
    refused, attempt = await runner.run(
        resume(suspended.interrupts[0].interrupt_id, suspended.agent_fingerprint)
    )
    assert attempt is None
    assert isinstance(refused, Refused) and refused.error_type == "AgentNotLoadable"
    assert "agents.no_such_module" in refused.message
    failed, _ = await runner.run(start())
    assert isinstance(failed, Failed) and failed.error_type == "AgentNotLoadable"


async def test_a_suspension_carries_the_graphs_state_values_as_json(tmp_path: Path) -> None:
    store = InMemoryStore()
    outcome, _ = await runner_for(tmp_path, "", store).run(start())
    assert isinstance(outcome, Suspended)
    # The conversion a completed run's result gets: messages as LangChain serializes them (the
    # id LangGraph gave it), with Interlock's role beside the type.
    assert outcome.values is not None
    [message] = outcome.values.pop("messages")
    assert message["id"]
    assert {k: message[k] for k in ("type", "role", "content")} == {
        "type": "human",
        "role": "user",
        "content": "CLM-4821",
    }
    assert outcome.values == {
        "claim_id": "CLM-4821",
        "claim": {"order_id": "98765", "amount": 240, "currency": "USD"},
    }
    # The interrupt's raw value, as the graph gave it.
    [interrupt] = outcome.interrupts
    assert interrupt.value["task_description"] == "Approve refund of $240 for order #98765"
    # The node that waits, as LangGraph's thread state names it.
    assert outcome.next == ["review"]


async def test_a_suspension_goes_without_state_values_too_large_to_carry(
    tmp_path: Path,
) -> None:
    store = InMemoryStore()
    # A message may have 100,000 characters: the state grows past the bound over several.
    filler = [ChatMessage(content="x" * 100_000) for _ in range(3)]
    assert MAX_SUSPENDED_VALUES_BYTES < 3 * 100_000
    conversation = AgentInput(messages=[*filler, ChatMessage(content="CLM-4821")])
    big = start().model_copy(update={"input": conversation})
    with capture_logs() as logs:
        outcome, _ = await runner_for(tmp_path, "", store).run(big)
    assert isinstance(outcome, Suspended) and outcome.values is None
    assert outcome.interrupts[0].value["claim_id"] == "CLM-4821"
    [warning] = [e for e in logs if e["event"] == "suspension.values_too_large"]
    assert warning["log_level"] == "warning"
    assert warning["bytes"] > warning["max_bytes"] == MAX_SUSPENDED_VALUES_BYTES


async def test_a_superseded_attempt_is_fenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(tmp_path / "ledger.jsonl"))
    store = InMemoryStore()
    runner = runner_for(tmp_path, "", store)
    outcome, attempt = await runner.run(start())
    assert isinstance(outcome, Suspended) and attempt is not None and attempt.number == 1
    await runner.ensure_current(attempt)
    await store.attempts.begin("exec-r", 1)  # another replica took the dispatch over
    with pytest.raises(Fenced):
        await runner.ensure_current(attempt)


def test_a_refused_resume_suspends_again_as_a_new_suspension() -> None:
    dispatched = sm.on_requested(f.pending(), f.requested()).execution
    suspended = sm.on_suspended(dispatched, f.suspended_event(dispatched)).execution
    resumed = sm.on_decision(suspended, f.decision(suspended)).execution
    assert resumed.status is ExecutionStatus.RESUMING and resumed.epoch == 2
    refusal = f.report(
        resumed,
        ReportOutcome.REFUSED,
        error=ExecutionFailure(error_type="AgentVersionChanged", message="code changed: v1 -> v2"),
    )
    outcome = sm.on_refused(resumed, refusal)
    again = outcome.execution
    assert again.status is ExecutionStatus.SUSPENDED
    assert again.suspension is not None and again.suspension.suspension_id == 2
    assert suspended.suspension is not None
    assert again.suspension.interrupt_ids == suspended.suspension.interrupt_ids
    assert again.suspension.interrupts == suspended.suspension.interrupts
    assert outcome.transitions[0].reason == "code changed: v1 -> v2"
    # A stale refusal (another epoch) changes nothing.
    stale = refusal.model_copy(update={"epoch": 1})
    assert sm.on_refused(resumed, stale).ignored
    # The sandbox reports the run started before it refuses: the refusal still applies.
    running = sm.on_started(resumed, f.report(resumed, ReportOutcome.STARTED)).execution
    assert running.status is ExecutionStatus.RUNNING
    assert sm.on_refused(running, refusal).execution.status is ExecutionStatus.SUSPENDED


async def test_a_checkpoint_over_the_budget_fails_the_run_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(tmp_path / "ledger.jsonl"))
    store = InMemoryStore()
    graphs = GraphCache(
        load_registry(registry_file(tmp_path, "")),
        GuardedSaver(InMemorySaver(), max_checkpoint_bytes=2_000),
    )
    runner = AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=30,
        max_step_result_bytes=100,
    )
    big = start().model_copy(update={"input": AgentInput(message="CLM-4821 " + "x" * 5_000)})
    outcome, _ = await runner.run(big)
    assert isinstance(outcome, Failed) and outcome.error_type == "CheckpointTooLarge"
    assert "over the budget of 2000 bytes" in outcome.message


async def test_a_run_records_its_node_updates_as_progress(tmp_path: Path) -> None:
    store = InMemoryStore()
    runner = runner_for(tmp_path, "", store)
    outcome, _ = await runner.run(start())
    assert isinstance(outcome, Suspended)
    first_run = await store.progress.after("p", "exec-r", "")
    # The state the run started from (its input applied), then each node's update.
    assert [(e.kind, e.data.get("node")) for e in first_run] == [
        ("values", None),
        ("update", "lookup_claim"),
    ]
    assert "CLM-4821" in str(first_run[0].data["values"])
    assert first_run[1].data["update"]["claim_id"] == "CLM-4821"
    # Keys sort by epoch, attempt and sequence: a resume's progress comes after the start's.
    assert [e.key for e in first_run] == ["000001.0001.000001", "000001.0001.000002"]
    await runner.run(resume(outcome.interrupts[0].interrupt_id, outcome.agent_fingerprint))
    resumed = await store.progress.after("p", "exec-r", first_run[-1].key)
    assert resumed and all(e.key.startswith("000002.0001.") for e in resumed)
    assert "review" in [e.data.get("node") for e in resumed]


class CrashingSaver(InMemorySaver):
    """Loses the process between a step's writes and its checkpoint, once: the writes of the
    node that ran are stored, the checkpoint after it is not (a SIGKILL at that moment)."""

    def __init__(self, crash_at_put: int) -> None:
        super().__init__()
        self.puts = 0
        self.crash_at_put = crash_at_put

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.puts += 1
        if self.puts == self.crash_at_put:
            raise AutoReconnect("process killed between the writes and the checkpoint")
        return await super().aput(config, checkpoint, metadata, new_versions)


async def test_a_run_killed_between_a_nodes_writes_and_its_checkpoint_continues(
    tmp_path: Path,
) -> None:
    # A run checkpoints when it exits (durability "exit"): LangGraph stores the suspension's
    # pending writes, then the checkpoint. Killed in between, the writes are stored and no
    # checkpoint is: the next attempt must start over (its durable steps served from the cache)
    # and suspend, not read the stray writes as a finished graph and complete the execution.
    store = InMemoryStore()
    saver = CrashingSaver(crash_at_put=1)  # the run's one checkpoint write: crash there
    runner = runner_for(tmp_path, "", store, saver)
    with pytest.raises(AutoReconnect):
        await runner.run(start())
    outcome, _ = await runner.run(start())
    assert isinstance(outcome, Suspended), outcome
    assert outcome.interrupts[0].value["claim_id"] == "CLM-4821"


def turn_start(execution_id: str, turn: ThreadTurn, text: str) -> ExecutionDispatched:
    return ExecutionDispatched(
        execution_id=execution_id,
        agent="conversation",
        epoch=1,
        kind=DispatchKind.START,
        input=AgentInput(message=text, turn=turn),
        **SCOPE,
    )


async def test_a_turn_starts_from_its_base_even_when_an_attempt_died_after_storing_the_copy() -> (
    None
):
    """With a saver that stores each checkpoint as it comes (LangGraph's own, as in dev mode),
    an attempt can die with the turn's copy of its base stored and its input not run: the next
    attempt runs the input on that copy (never reports the base's state as the turn's)."""
    saver = InMemorySaver()
    runner = runner_on(CommonSettings().agents_file, InMemoryStore(), saver)
    first, _ = await runner.run(turn_start("turn-1", ThreadTurn(thread_id="t", turn=1), "hello"))
    assert isinstance(first, Completed)
    turn = ThreadTurn(thread_id="t", turn=2, after="turn-1", base="turn-1")
    await copy_base(saver, turn, {"configurable": {"thread_id": "turn-2"}})  # the dead attempt
    second, _ = await runner.run(turn_start("turn-2", turn, "again"))
    assert isinstance(second, Completed)
    [*_, reply] = second.result["messages"]
    assert reply["content"] == "turn 2: you said 'again'; before: ['hello']", second.result
