"""All four services' handlers wired on the synchronous in-memory bus (tests/direct_bus.py) with
the in-memory store and LangGraph's in-memory saver. The bus delivers each publish to its
consumers before ``publish`` returns, so every step is complete on return. The ``world`` fixture
(tests/unit/conftest.py) builds one per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from services.gateway.answers import DecisionOutcome, ReviewAnswer
from services.gateway.intake import Intake
from services.notifier.app import NotifierSettings
from services.notifier.app import register as register_notifier
from services.orchestrator.app import OrchestratorSettings
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.deadlines import DeadlineSweeper
from services.orchestrator.handlers import Orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import SandboxSettings
from services.sandbox.app import register as register_sandbox
from shared.agents import load_registry
from shared.domain.execution import Execution
from shared.domain.principals import Reviewer, person
from shared.events import AgentInput
from shared.store.memory import InMemoryStore
from shared.topics import Topics
from tests import factories as f
from tests.direct_bus import Collector, DirectBus

SCOPE = {"project_id": "p1", "workspace_id": "w1"}
TESTER = Reviewer(label="tester", identity=person("tester@example.com"))
"""Who invokes by default: a person, as a key with an email is."""
REVIEWER = Reviewer(label="reviewer-1", identity=person("reviewer-1@example.com"))


@dataclass
class World:
    intake: Intake
    store: InMemoryStore
    ledger: Path
    bus: DirectBus
    """The services' bus: what tests publish with, raw (``publish_raw``) or as events."""
    topics: Topics
    dispatches: list[dict[str, Any]]
    sweeper: DeadlineSweeper
    clock_file: Path
    deadline_events: list[dict[str, Any]]
    saver: InMemorySaver
    """The sandbox's checkpoints."""
    orchestrator: Orchestrator
    """The orchestrator's handlers (what its sweepers call)."""

    def set_clock(self, now: datetime) -> None:
        """What the orchestrator takes for now (deadlines are computed and fired by it)."""
        self.clock_file.write_text(now.isoformat())

    async def execution(self, execution_id: str) -> Execution:
        found = await self.store.executions.get("p1", execution_id)
        assert found is not None
        return found

    async def invoke(
        self,
        agent: str,
        message: str,
        key: str | None = None,
        *,
        requester: Reviewer = TESTER,
    ) -> Execution:
        return await self.intake.invoke(
            **SCOPE,
            agent=agent,
            agent_input=AgentInput(message=message),
            idempotency_key=key,
            requested_by=requester.label,
            requester_identity=requester.identity,
        )

    async def decide(
        self,
        execution_id: str,
        decision: str,
        notes: str | None = None,
        *,
        reviewer: Reviewer = REVIEWER,
    ) -> DecisionOutcome:
        return await self.intake.decide(
            **SCOPE,
            execution_id=execution_id,
            answer=ReviewAnswer(decision=decision, reviewer_notes=notes),
            reviewer=reviewer,
        )


@asynccontextmanager
async def in_process_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[World]:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(ledger))
    settings = SandboxSettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    bus = DirectBus()
    store = InMemoryStore()
    clock_file = tmp_path / "clock"
    orchestrator_settings = OrchestratorSettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", clock_file=clock_file
    )
    saver = InMemorySaver()
    orchestrator, sweeper = register_orchestrator(
        bus, orchestrator_settings, store, bus, erase_checkpoints=saver_eraser(saver)
    )
    register_sandbox(bus, settings, store, bus, saver)
    notifier_settings = NotifierSettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    # With the store, suspensions are stored as deliveries for the configured channels (none
    # unless a test points INTERLOCK_NOTIFICATIONS_FILE at some).
    register_notifier(bus, notifier_settings, bus, store)
    registry = load_registry(settings.agents_file)
    intake = Intake(
        store=store,
        publisher=bus,
        topics=settings.topics,
        registry=registry,
        signer=f.gateway_signer(),
    )
    # Observers, added last: a message reaches them once the services' consumers (and what
    # those published in turn) are done with it.
    dispatches: list[dict[str, Any]] = []
    bus.add_consumer(
        settings.topics.dispatched, "test-observer", Collector("test-observer", dispatches)
    )
    deadline_events: list[dict[str, Any]] = []
    bus.add_consumer(
        settings.topics.deadlines,
        "test-deadline-observer",
        Collector("test-deadline-observer", deadline_events),
    )
    yield World(
        intake,
        store,
        ledger,
        bus,
        settings.topics,
        dispatches,
        sweeper,
        clock_file,
        deadline_events,
        saver,
        orchestrator,
    )
