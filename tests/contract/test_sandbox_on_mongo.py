"""The sandbox's runs on a real MongoDB-compatible server: the step cache travels with the
checkpoint (no query by ``execution_id``, which FerretDB answers by scanning the collection), an
attempt after a crash finds what the crashed one stored by key, and what a run costs in
commands."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient, monitoring
from pymongo.errors import AutoReconnect

from services.sandbox.checkpointer import GuardedSaver
from services.sandbox.loading import GraphCache
from services.sandbox.mongo_checkpoints import AsyncMongoSaver
from services.sandbox.runner import AgentRunner, Completed, Suspended
from shared.agents import load_registry
from shared.events import AgentInput, DispatchKind, ExecutionDispatched, ResumeInstruction
from shared.settings import DEFAULT_AGENTS_FILE
from shared.store.mongo import MongoStore
from tests.conftest import unique_name

pytestmark = pytest.mark.integration

SCOPE = {"project_id": "p", "workspace_id": "w"}


class Commands(monitoring.CommandListener):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in {"find", "insert", "update", "delete"}:
            target = event.command.get(event.command_name)
            self.seen.append((event.command_name, target, event.command.get("filter")))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def on(self, collection: str, command: str) -> list[Any]:
        return [f for c, coll, f in self.seen if coll == collection and c == command]


class CrashAtPut(AsyncMongoSaver):
    """Loses the process at its next checkpoint write: the run's steps are stored, its
    checkpoint (and with it the step index) is not."""

    crash = False

    async def aput_serialized(self, *args: Any, **kwargs: Any) -> Any:
        # The guard hands its bytes to this put (services/sandbox/checkpoint_bytes.py).
        if self.crash:
            self.crash = False
            raise AutoReconnect("killed before the checkpoint")
        return await super().aput_serialized(*args, **kwargs)


@pytest.fixture
async def world(mongodb_uri: str) -> AsyncIterator[tuple[AgentRunner, Commands, CrashAtPut]]:
    commands = Commands()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongodb_uri, tz_aware=True, event_listeners=[commands]
    )
    name = unique_name("sandbox")
    store = MongoStore(client, name)
    await store.ensure_indexes()
    saver = CrashAtPut(store.database)
    graphs = GraphCache(
        load_registry(DEFAULT_AGENTS_FILE), GuardedSaver(saver, max_checkpoint_bytes=1_000_000)
    )
    runner = AgentRunner(
        graphs,
        steps=store.steps,
        attempts=store.attempts,
        run_timeout_seconds=60,
        max_step_result_bytes=100_000,
        progress=store.progress,
    )
    commands.seen.clear()
    try:
        yield runner, commands, saver
    finally:
        await client.drop_database(name)
        await client.close()


def dispatch(epoch: int, resume: ResumeInstruction | None = None) -> ExecutionDispatched:
    return ExecutionDispatched(
        execution_id="exec-b",
        agent="bench-pipeline",
        epoch=epoch,
        kind=DispatchKind.RESUME if resume else DispatchKind.START,
        input=None if resume else AgentInput(message="steps=3"),
        resume=resume,
        **SCOPE,
    )


async def suspend(runner: AgentRunner) -> Suspended:
    outcome, _ = await runner.run(dispatch(1))
    assert isinstance(outcome, Suspended), outcome
    return outcome


def approve(suspended: Suspended) -> ResumeInstruction:
    return ResumeInstruction(
        suspension_id=1,
        interrupt_ids=[suspended.interrupts[0].interrupt_id],
        decision="approve",
        agent_fingerprint=suspended.agent_fingerprint,
    )


async def test_a_run_reads_its_steps_with_its_checkpoint_and_only_by_id(
    world: tuple[AgentRunner, Commands, CrashAtPut],
) -> None:
    runner, commands, _ = world
    suspended = await suspend(runner)
    first_run = list(commands.seen)
    # A first run of a new execution reads nothing of its thread (it is known to be new): its
    # one read is the check, as it ends, that no newer attempt began meanwhile.
    assert [(c, where) for c, where, _ in first_run if c == "find"] == [("find", "attempts")]
    assert len(commands.on("steps", "insert")) == 3  # each step stored as it completes
    assert len(first_run) <= 8, first_run
    commands.seen.clear()
    outcome, _ = await runner.run(dispatch(2, approve(suspended)))
    assert isinstance(outcome, Completed), outcome
    # The steps before the interrupt replay from the index its checkpoint carries: the steps
    # collection is written (the two new steps), never read.
    assert commands.on("steps", "find") == [], commands.seen
    assert len(commands.on("steps", "insert")) == 2
    finds = [f for c, _, f in commands.seen if c == "find"]
    assert all(set(f) == {"_id"} and isinstance(f["_id"], str) for f in finds), finds
    assert len(commands.seen) <= 10, commands.seen


async def test_an_attempt_after_a_crash_finds_the_crashed_attempts_steps(
    world: tuple[AgentRunner, Commands, CrashAtPut],
) -> None:
    runner, commands, saver = world
    suspended = await suspend(runner)
    commands.seen.clear()
    saver.crash = True
    with pytest.raises(AutoReconnect):
        await runner.run(dispatch(2, approve(suspended)))
    assert len(commands.on("steps", "insert")) == 2  # stored by the attempt that crashed
    commands.seen.clear()
    outcome, _ = await runner.run(dispatch(2, approve(suspended)))
    assert isinstance(outcome, Completed), outcome
    # Attempt 2 of the epoch looked those steps up by key, and ran (stored) none again.
    assert commands.on("steps", "insert") == [], commands.seen
    looked_up = commands.on("steps", "find")
    assert looked_up and all(set(f) == {"_id"} for f in looked_up), looked_up
