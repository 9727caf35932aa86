"""The orchestrator applies events to the version it last stored or read (services/orchestrator/
known.py): an event costs no read while that copy is current; a copy out of date loses its
compare-and-set and the event is applied to the newest version; an outcome that writes nothing
is never concluded from a copy."""

from __future__ import annotations

from typing import Any

from services.orchestrator.handlers import Orchestrator
from services.orchestrator.known import KnownExecutions
from shared.agents import load_registry
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    ExecutionDispatched,
    ExecutionReported,
    ReportOutcome,
)
from shared.senders import Unverified
from shared.settings import CommonSettings
from shared.store.memory import InMemoryExecutionStore, InMemoryStore
from shared.store.ports import Claim
from shared.topics import Topics
from tests import factories as f
from tests.publishers import RecordingPublisher

SCOPE = f.SCOPE


class CountingExecutions(InMemoryExecutionStore):
    """The in-memory store, counting the orchestrator's reads: "get" for the newest version,
    "any" for any version (``min_epoch=0``)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get(
        self, project_id: str, execution_id: str, *, min_epoch: int | None = None
    ) -> Execution | None:
        self.reads.append("any" if min_epoch == 0 else "get")
        return await super().get(project_id, execution_id, min_epoch=min_epoch)


class Recorder(RecordingPublisher):
    @property
    def dispatches(self) -> list[tuple[str, int]]:
        return [
            (e.kind.value, e.epoch) for e in self.published if isinstance(e, ExecutionDispatched)
        ]


def counting_store() -> tuple[InMemoryStore, CountingExecutions]:
    store = InMemoryStore()
    executions = CountingExecutions()
    store.executions = executions
    return store, executions


def replica(store: InMemoryStore, publisher: Recorder | None = None) -> Orchestrator:
    """One orchestrator replica: its own copies, the shared store."""
    return Orchestrator(
        store=store,
        publisher=publisher or Recorder(),
        topics=Topics(""),
        registry=load_registry(CommonSettings().agents_file),
    )


def reported(epoch: int, outcome: ReportOutcome, **extra: Any) -> ExecutionReported:
    return ExecutionReported(execution_id="exec-1", epoch=epoch, outcome=outcome, **SCOPE, **extra)


def decided(**extra: Any) -> DecisionSubmitted:
    return DecisionSubmitted(execution_id="exec-1", decision="approve", **SCOPE, **extra)


async def stored(store: InMemoryStore) -> Execution:
    """The newest version, without counting it as the orchestrator's read."""
    found = store.executions._items.get("exec-1")
    assert found is not None
    return found


async def test_a_whole_execution_reads_the_store_once() -> None:
    store, executions = counting_store()
    publisher = Recorder()
    orchestrator = replica(store, publisher)
    await store.executions.create(f.pending("exec-1"))  # the gateway's
    executions.reads.clear()

    await orchestrator.on_requested(f.requested("exec-1"), f.GATEWAY)
    await orchestrator.on_reported(reported(1, ReportOutcome.STARTED))
    await orchestrator.on_suspended(f.suspended_event(await stored(store)))
    decision = decided(suspension_id=1)
    # The gateway claimed the suspension before publishing the decision.
    await store.decisions.claim(
        "exec-1", 1, Claim(decision.decision_id, decision.model_dump_json())
    )
    await orchestrator.on_decision(decision, f.GATEWAY)
    await orchestrator.on_reported(reported(2, ReportOutcome.STARTED))
    await orchestrator.on_reported(reported(2, ReportOutcome.COMPLETED, result={"ok": True}))

    assert executions.reads == ["any"]  # any version, for the request; then its own copies
    done = await stored(store)
    assert (done.status, done.version) == (ExecutionStatus.COMPLETED, 7)
    assert publisher.dispatches == [("start", 1), ("resume", 2)]


async def test_a_request_that_carries_its_stored_execution_is_started_without_a_read() -> None:
    """The gateway's request carries the execution as it stored it (``stored_as``): nothing is
    read; should it not be the newest, its compare-and-set loses and the newest is read."""
    store, executions = counting_store()
    orchestrator = replica(store)
    created, _ = await store.executions.create(f.pending("exec-1"))  # the gateway's
    executions.reads.clear()
    carrying = f.requested("exec-1").model_copy(update={"stored_as": created.model_dump_json()})
    await orchestrator.on_requested(carrying, f.GATEWAY)
    assert executions.reads == []
    assert (await stored(store)).epoch == 1

    # A copy that is no longer the newest (a retry of the request after it started): its
    # compare-and-set loses, the newest is read, and nothing starts twice.
    again = replica(store)
    await again.on_requested(carrying, f.GATEWAY)
    assert executions.reads == ["get"]
    assert (await stored(store)).version == 2


async def test_what_an_outside_producer_says_was_stored_is_not_believed() -> None:
    store, executions = counting_store()
    created, _ = await store.executions.create(f.pending("exec-1"))
    forged = created.model_copy(update={"requested_by": "someone else", "agent": "outreach"})
    claim = f.requested("exec-1").model_copy(update={"stored_as": forged.model_dump_json()})
    executions.reads.clear()
    await replica(store).on_requested(claim, Unverified("no signature"))
    assert executions.reads == ["any"]  # the store was asked instead
    started = await stored(store)
    assert started.epoch == 1 and started.agent == "refund-approval"


async def test_a_copy_out_of_date_loses_its_write_and_the_event_applies_to_the_newest() -> None:
    store, executions = counting_store()
    here, elsewhere = replica(store), replica(store)
    await store.executions.create(f.pending("exec-1"))
    await here.on_requested(f.requested("exec-1"), f.GATEWAY)
    await here.on_reported(reported(1, ReportOutcome.STARTED))
    # Another replica (a rebalance) cancels: this replica's copy says running, epoch 1.
    await elsewhere.on_cancel(
        CancelRequested(execution_id="exec-1", reason="no longer needed", **SCOPE), f.GATEWAY
    )
    executions.reads.clear()

    await here.on_suspended(
        f.suspended_event((await stored(store)).model_copy(update={"epoch": 1}))
    )

    assert executions.reads == ["get"]  # after the lost compare-and-set
    after = await stored(store)
    assert after.status is ExecutionStatus.CANCELLED and after.suspension is None


async def test_a_decision_a_copy_would_refuse_is_decided_on_the_newest_version() -> None:
    store, executions = counting_store()
    here, elsewhere = replica(store), replica(store)
    await store.executions.create(f.pending("exec-1"))
    await here.on_requested(f.requested("exec-1"), f.GATEWAY)
    await here.on_reported(reported(1, ReportOutcome.STARTED))
    await elsewhere.on_suspended(f.suspended_event(await stored(store)))
    executions.reads.clear()

    # Naming no suspension: on this replica's copy (running) it is "not suspended".
    await here.on_decision(decided(), f.GATEWAY)

    assert executions.reads == ["get"]
    after = await stored(store)
    assert after.status is ExecutionStatus.RESUMING
    assert not [a for a in after.audit if a.action == "decision.rejected"]


async def test_an_event_a_copy_would_ignore_is_decided_on_the_newest_version() -> None:
    store, _ = counting_store()
    here, elsewhere = replica(store), replica(store)
    await store.executions.create(f.pending("exec-1"))
    await here.on_requested(
        f.requested("exec-1"), f.GATEWAY
    )  # this replica's copy: pending, epoch 1
    await elsewhere.on_reported(reported(1, ReportOutcome.STARTED))
    await elsewhere.on_suspended(f.suspended_event(await stored(store)))
    await elsewhere.on_decision(decided(suspension_id=1), f.GATEWAY)  # resuming, epoch 2

    # "Stale epoch 2 (now 1)" says the copy; the newest version takes it.
    await here.on_reported(reported(2, ReportOutcome.STARTED))

    assert (await stored(store)).status is ExecutionStatus.RUNNING


async def test_a_redelivered_event_is_confirmed_on_a_fresh_read_and_re_drives_its_command() -> None:
    store, executions = counting_store()
    publisher = Recorder()
    orchestrator = replica(store, publisher)
    await store.executions.create(f.pending("exec-1"))
    await orchestrator.on_requested(f.requested("exec-1"), f.GATEWAY)
    executions.reads.clear()

    await orchestrator.on_requested(f.requested("exec-1"), f.GATEWAY)

    assert executions.reads == ["get"]
    assert publisher.dispatches == [("start", 1), ("start", 1)]
    assert (await stored(store)).version == 2


async def test_a_direct_producers_decision_takes_the_claim_itself() -> None:
    store, _ = counting_store()
    orchestrator = replica(store)
    await store.executions.create(f.pending("exec-1"))
    await orchestrator.on_requested(f.requested("exec-1"), f.GATEWAY)
    await orchestrator.on_reported(reported(1, ReportOutcome.STARTED))
    await orchestrator.on_suspended(f.suspended_event(await stored(store)))

    decision = decided(suspension_id=1)  # published to the topic, no gateway claim
    await orchestrator.on_decision(decision, f.GATEWAY)

    holder = await store.decisions.holder("exec-1", 1)
    assert holder is not None and holder.decision_id == decision.decision_id
    assert (await stored(store)).status is ExecutionStatus.RESUMING


def test_known_executions_keep_the_newest_version_within_their_capacity() -> None:
    known = KnownExecutions(capacity=2)
    first = f.pending("a").model_copy(update={"version": 3})
    known.put(first)
    known.put(first.model_copy(update={"version": 2}))  # read earlier, returned later
    assert known.get("a") == first
    known.put(f.pending("b"))
    assert known.get("a") == first  # now the most recently used
    known.put(f.pending("c"))
    assert known.get("b") is None and known.get("a") == first and len(known) == 2
    nothing = KnownExecutions(capacity=0)
    nothing.put(first)
    assert nothing.get("a") is None
