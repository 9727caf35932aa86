"""The storage contract: the in-memory, SQLite and MongoDB (FerretDB here) stores behave alike."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.deadlines import DeadlineKind, Deadlines
from shared.domain.descriptions import AgentDescription
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.versions import AgentVersion
from shared.events import PendingInterrupt
from shared.store.cursor import InvalidCursor
from shared.store.ports import Claim, Store
from tests import factories as f


async def test_create_is_insert_if_absent(store: Store) -> None:
    first = f.pending("exec-a")
    stored, created = await store.executions.create(first)
    assert created and stored == first
    other = first.model_copy(update={"agent": "chain-approval"})
    again, created_again = await store.executions.create(other)
    assert not created_again and again == first


async def test_get_round_trips_exactly_and_is_scoped_by_project(store: Store) -> None:
    execution = f.suspended("exec-b").model_copy(
        update={
            # Agent data with keys some servers refuse as document keys must survive.
            "result": {"a.b": 1, "$weird": [1, 2.5, None, {"x.y": True}], "ünï": "çødé"},
        }
    )
    await store.executions.create(execution)
    assert await store.executions.get("proj-1", "exec-b") == execution
    assert await store.executions.get("other-project", "exec-b") is None
    assert await store.executions.get("proj-1", "missing") is None


async def test_a_suspensions_state_values_and_interrupts_round_trip(store: Store) -> None:
    execution = f.suspended("exec-values")
    assert execution.suspension is not None
    weird = {"a.b": 1, "$x": {"c.d": [None, 2.5]}, "ünï": "çødé"}
    suspension = execution.suspension.model_copy(
        update={
            # The graph's state and what it interrupted with are agent data: keys some servers
            # refuse as document keys must survive, on the first write and on a replace.
            "values": {**weird, "messages": [{"role": "user", "content": "CLM-4821"}]},
            "interrupts": [
                PendingInterrupt(interrupt_id="int-1", value=weird),
                PendingInterrupt(interrupt_id="int-2", value="plain text"),
            ],
        }
    )
    with_values = execution.model_copy(update={"suspension": suspension})
    created, _ = await store.executions.create(with_values)
    assert await store.executions.get("proj-1", "exec-values") == with_values
    replaced = await store.executions.replace(
        created, created.model_copy(update={"requested_by": "someone"})
    )
    assert replaced is not None
    stored = await store.executions.get("proj-1", "exec-values")
    assert stored == replaced and stored.suspension == suspension


async def test_replace_is_a_compare_and_set_on_version(store: Store) -> None:
    execution, _ = await store.executions.create(f.pending("exec-c"))
    running = execution.model_copy(update={"status": ExecutionStatus.RUNNING})
    stored = await store.executions.replace(execution, running)
    assert stored == running.model_copy(update={"version": 2})
    stale = execution.model_copy(update={"status": ExecutionStatus.ERROR})
    assert await store.executions.replace(execution, stale) is None
    assert (await store.executions.get("proj-1", "exec-c")) == stored


async def test_concurrent_compare_and_set_has_one_winner(store: Store) -> None:
    """Many rounds: a race that is lost only sometimes must still be caught."""
    for round_ in range(30):
        execution, _ = await store.executions.create(f.pending(f"exec-race-{round_}"))
        candidates = [
            execution.model_copy(update={"requested_by": f"writer-{i}"}) for i in range(8)
        ]
        results = await asyncio.gather(
            *(store.executions.replace(execution, c) for c in candidates)
        )
        won = [r for r in results if r is not None]
        assert len(won) == 1, f"round {round_}: {results}"
        stored = await store.executions.get("proj-1", execution.execution_id)
        assert stored is not None and stored.version == 2
        assert stored == won[0]
        assert stored.requested_by == candidates[results.index(won[0])].requested_by


async def test_versions_are_assigned_by_the_store(store: Store) -> None:
    execution = f.pending("exec-versions").model_copy(update={"version": 41})
    created, _ = await store.executions.create(execution)
    assert created.version == 1
    current = created
    for expected in range(2, 7):
        stored = await store.executions.replace(current, created)
        assert stored is not None and stored.version == expected
        assert await store.executions.get("proj-1", "exec-versions") == stored
        current = stored
    assert (
        await store.executions.replace(created.model_copy(update={"version": 3}), created) is None
    )
    listed = await store.executions.list("proj-1", "ws-1")
    assert [e.version for e in listed.items if e.execution_id == "exec-versions"] == [6]


async def test_a_writer_holding_any_older_version_loses_even_after_the_end(store: Store) -> None:
    """A writer may compare-and-set on a copy it kept (the orchestrator's, a head that trailed):
    however many versions came after, and whatever the store did with the old ones once the
    execution ended, its successor is never stored."""
    execution, _ = await store.executions.create(f.pending("exec-old-copies"))
    copies = [execution]
    for status in (ExecutionStatus.RUNNING, ExecutionStatus.SUSPENDED, ExecutionStatus.RESUMING):
        stored = await store.executions.replace(
            copies[-1], copies[-1].model_copy(update={"status": status})
        )
        assert stored is not None
        copies.append(stored)
    ended = await store.executions.replace(
        copies[-1], copies[-1].model_copy(update={"status": ExecutionStatus.COMPLETED})
    )
    assert ended is not None and ended.version == 5
    for old in copies:
        revived = old.model_copy(update={"status": ExecutionStatus.CANCELLED})
        assert await store.executions.replace(old, revived) is None, f"from version {old.version}"
    assert await store.executions.get("proj-1", "exec-old-copies") == ended
    # Something recorded after the end (a rejected decision's audit entry, say) still goes in.
    audited = await store.executions.replace(ended, ended.model_copy(update={"epoch": 9}))
    assert audited is not None and audited.version == 6
    assert await store.executions.get("proj-1", "exec-old-copies") == audited


async def test_compare_and_set_decides_at_once_and_settles_into_what_replace_leaves(
    store: Store,
) -> None:
    """A compare-and-set that won is readable before its settle (a reader goes past whatever
    follows it), loses to nothing older, and once settled leaves what ``replace`` would; a lost
    one returns None and settles nothing."""
    execution, _ = await store.executions.create(f.pending("exec-cas"))
    suspended = f.suspended("exec-cas")
    written = await store.executions.compare_and_set(execution, suspended)
    assert written is not None and written.execution.version == 2
    assert written.execution == suspended.model_copy(update={"version": 2})
    assert await store.executions.get("proj-1", "exec-cas") == written.execution
    assert await store.executions.compare_and_set(execution, suspended) is None
    await written.settle()
    assert await store.executions.get("proj-1", "exec-cas") == written.execution
    page = await store.executions.list("proj-1", "ws-1", status=ExecutionStatus.SUSPENDED)
    assert [e.execution_id for e in page.items] == ["exec-cas"]
    resumed = written.execution.model_copy(update={"status": ExecutionStatus.RESUMING})
    after = await store.executions.compare_and_set(written.execution, resumed)
    assert after is not None
    await after.settle()
    page = await store.executions.list("proj-1", "ws-1", status=ExecutionStatus.SUSPENDED)
    assert page.items == []


async def test_unchanged_since_tells_whether_a_version_is_still_the_newest(store: Store) -> None:
    execution, _ = await store.executions.create(f.pending("exec-unchanged"))
    running = await store.executions.replace(
        execution, execution.model_copy(update={"status": ExecutionStatus.RUNNING})
    )
    assert running is not None
    assert await store.executions.unchanged_since("exec-unchanged", running.version)
    assert not await store.executions.unchanged_since("exec-unchanged", execution.version)
    ended = await store.executions.replace(
        running, running.model_copy(update={"status": ExecutionStatus.COMPLETED})
    )
    assert ended is not None
    # However the store keeps older versions once the execution ended, they stay superseded.
    assert not await store.executions.unchanged_since("exec-unchanged", running.version)
    assert not await store.executions.unchanged_since("exec-unchanged", execution.version)
    assert await store.executions.unchanged_since("exec-unchanged", ended.version)


async def test_get_with_a_min_epoch_is_never_older_than_that_epoch(store: Store) -> None:
    created, _ = await store.executions.create(f.pending("exec-epochs"))
    current = created
    for epoch in range(1, 4):
        stored = await store.executions.replace(
            current, current.model_copy(update={"epoch": epoch})
        )
        assert stored is not None
        current = stored
    for min_epoch in range(4):
        found = await store.executions.get("proj-1", "exec-epochs", min_epoch=min_epoch)
        assert found is not None and found.epoch >= min_epoch
    assert await store.executions.get("proj-1", "exec-epochs", min_epoch=3) == current
    assert await store.executions.get("other-project", "exec-epochs", min_epoch=0) is None
    assert await store.executions.get("proj-1", "missing", min_epoch=0) is None


async def test_get_with_min_epoch_0_is_any_stored_version(store: Store) -> None:
    assert await store.executions.get("proj-1", "exec-any", min_epoch=0) is None
    created, _ = await store.executions.create(f.pending("exec-any"))
    assert await store.executions.get("proj-1", "exec-any", min_epoch=0) == created
    assert await store.executions.get("other-project", "exec-any", min_epoch=0) is None
    current = created
    for epoch in range(1, 4):
        stored = await store.executions.replace(
            current, current.model_copy(update={"epoch": epoch})
        )
        assert stored is not None
        current = stored
    ended = await store.executions.replace(
        current, current.model_copy(update={"status": ExecutionStatus.ERROR})
    )
    assert ended is not None
    found = await store.executions.get("proj-1", "exec-any", min_epoch=0)
    assert found is not None and 1 <= found.version <= ended.version
    assert found.execution_id == "exec-any" and found.project_id == "proj-1"


async def test_list_filters_by_scope_and_status_and_pages_oldest_first(store: Store) -> None:
    base = f.pending("seed")
    created = []
    for i in range(7):
        execution = base.model_copy(
            update={
                "execution_id": f"exec-{i}",
                "created_at": base.created_at + timedelta(seconds=i % 3),
                "status": ExecutionStatus.SUSPENDED if i % 2 == 0 else ExecutionStatus.RUNNING,
            }
        )
        created.append(execution)
        await store.executions.create(execution)
    await store.executions.create(
        base.model_copy(update={"execution_id": "elsewhere", "workspace_id": "ws-2"})
    )

    expected = sorted(
        (e for e in created if e.status is ExecutionStatus.SUSPENDED),
        key=lambda e: (e.created_at, e.execution_id),
    )
    seen, cursor = [], None
    while True:
        page = await store.executions.list(
            "proj-1", "ws-1", status=ExecutionStatus.SUSPENDED, limit=3, cursor=cursor
        )
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [e.execution_id for e in seen] == [e.execution_id for e in expected]
    everything = await store.executions.list("proj-1", "ws-1", limit=100)
    assert len(everything.items) == 7 and everything.next_cursor is None
    assert (await store.executions.list("proj-2", "ws-1")).items == []


async def test_list_rejects_a_forged_cursor(store: Store) -> None:
    with pytest.raises(InvalidCursor):
        await store.executions.list("proj-1", "ws-1", cursor="not-a-cursor!!")


async def test_decision_claim_has_exactly_one_holder(store: Store) -> None:
    claims = [Claim(f"decision-{i}", f'{{"n": {i}}}') for i in range(6)]
    holders = await asyncio.gather(*(store.decisions.claim("exec-e", 1, c) for c in claims))
    assert len({h.decision_id for h in holders}) == 1
    winner = holders[0]
    assert winner in claims
    assert await store.decisions.claim("exec-e", 1, winner) == winner
    assert await store.decisions.claim("exec-e", 2, claims[3]) == claims[3]


async def test_the_holder_of_a_claim_is_read_without_claiming(store: Store) -> None:
    assert await store.decisions.holder("exec-h", 1) is None
    assert await store.decisions.holder("exec-h", 1) is None  # reading took nothing
    first = Claim("decision-a", '{"n": 1}')
    assert await store.decisions.claim("exec-h", 1, first) == first
    assert await store.decisions.holder("exec-h", 1) == first
    assert await store.decisions.claim("exec-h", 1, Claim("decision-b", "{}")) == first
    assert await store.decisions.holder("exec-h", 2) is None


async def test_replicas_starting_together_publish_agent_versions_without_error(
    store: Store,
) -> None:
    # Two sandboxes starting at once both upsert the same new _id; on MongoDB and FerretDB one
    # insert may lose with a duplicate key error, which once killed a replica at start-up.
    for round_ in range(5):
        versions = [AgentVersion(agent=f"agent-{round_}", fingerprint=f"fp-{i}") for i in range(8)]
        await asyncio.gather(*(store.agent_versions.publish(v) for v in versions))
        stored = await store.agent_versions.get(f"agent-{round_}")
        assert stored is not None and stored.fingerprint in {v.fingerprint for v in versions}


async def test_an_agent_version_keeps_its_input_keys(store: Store) -> None:
    published = AgentVersion(
        agent="agent-inputs", fingerprint="fp", input_keys=["messages", "topic"]
    )
    await store.agent_versions.publish(published)
    assert await store.agent_versions.get("agent-inputs") == published
    await store.agent_versions.publish(AgentVersion(agent="agent-none", fingerprint="fp"))
    stored = await store.agent_versions.get("agent-none")
    assert stored is not None and stored.input_keys is None


async def test_an_unloadable_agent_is_reported_beside_its_version_until_it_loads_again(
    store: Store,
) -> None:
    loaded = AgentVersion(agent="agent-fixed", fingerprint="fp-1", input_keys=["messages"])
    await store.agent_versions.publish(loaded)
    await store.agent_versions.report_unloadable("agent-fixed", "ImportError: no module 'x'")
    await store.agent_versions.report_unloadable("agent-never", "SyntaxError: bad")
    await store.agent_versions.report_unloadable("agent-never", "SyntaxError: worse")
    assert await store.agent_versions.unloadable() == {
        "agent-fixed": "ImportError: no module 'x'",
        "agent-never": "SyntaxError: worse",
    }
    # The version loaded before stays: its suspensions are still its own.
    assert await store.agent_versions.get("agent-fixed") == loaded
    assert await store.agent_versions.get("agent-never") is None
    # A release that loads it again clears the error.
    await store.agent_versions.publish(loaded.model_copy(update={"fingerprint": "fp-2"}))
    assert await store.agent_versions.unloadable() == {"agent-never": "SyntaxError: worse"}
    stored = await store.agent_versions.get("agent-fixed")
    assert stored is not None and stored.fingerprint == "fp-2"


async def test_an_agent_version_is_published_with_how_its_graph_looks(store: Store) -> None:
    # JSON schemas hold keys no MongoDB-compatible server takes as document keys ($defs, $ref,
    # dotted names): a description round-trips them as text.
    schema = {"$defs": {"a.b": {"type": "object"}}, "$ref": "#/$defs/a.b"}
    described = AgentDescription(
        graphs=['{"nodes": [], "edges": []}', '{"nodes": [{"id": "sub:x"}], "edges": []}'],
        schemas=json.dumps({"input_schema": schema, "context_schema": None}),
        subgraphs=json.dumps({"sub": {"state_schema": schema}}),
    )
    version = AgentVersion(agent="agent-drawn", fingerprint="fp-1", input_keys=["messages"])
    await store.agent_versions.publish(version, described)
    assert await store.agent_versions.description("agent-drawn") == described
    # Reading the version, on the path of every run and decision, is unchanged by it.
    assert await store.agent_versions.get("agent-drawn") == version
    # A version published without one (a sandbox of the release before) leaves none: a
    # description never outlives the version it described.
    await store.agent_versions.publish(version.model_copy(update={"fingerprint": "fp-2"}))
    assert await store.agent_versions.description("agent-drawn") is None
    assert await store.agent_versions.description("agent-never-published") is None
    # A load error reported later keeps both, as it keeps the version.
    await store.agent_versions.publish(version, described)
    await store.agent_versions.report_unloadable("agent-drawn", "ImportError: gone")
    assert await store.agent_versions.description("agent-drawn") == described


async def test_undelivered_before_lists_pending_requests_left_undelivered(store: Store) -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    minute = timedelta(minutes=1)

    def undelivered(execution_id: str, since: datetime | None, **changes: object) -> Execution:
        return f.pending(execution_id).model_copy(update={"undelivered_since": since, **changes})

    for execution in [
        undelivered("ud-late", now - 10 * minute),
        undelivered("ud-older", now - 20 * minute, project_id="proj-2"),
        undelivered("ud-recent", now + minute),
        undelivered("ud-delivered", None),
        undelivered("ud-dispatched", now - 30 * minute, epoch=1),
        undelivered("ud-ended", now - 30 * minute, status=ExecutionStatus.ERROR),
    ]:
        await store.executions.create(execution)
    found = await store.executions.undelivered_before(now)
    assert [e.execution_id for e in found] == ["ud-older", "ud-late"]
    assert [e.execution_id for e in await store.executions.undelivered_before(now, limit=1)] == [
        "ud-older"
    ]
    # A retry clears the mark: the request is no longer the sweep's.
    late = await store.executions.get("proj-1", "ud-late")
    assert late is not None
    cleared = late.model_copy(update={"undelivered_since": None})
    assert await store.executions.replace(late, cleared) is not None
    assert [e.execution_id for e in await store.executions.undelivered_before(now)] == ["ud-older"]


async def test_count_live_by_status_counts_the_latest_version_across_projects(
    store: Store,
) -> None:
    assert await store.executions.count_live_by_status() == {}
    await store.executions.create(f.pending("count-a"))
    await store.executions.create(f.suspended("count-b"))
    other = f.suspended("count-c").model_copy(update={"project_id": "proj-2"})
    await store.executions.create(other)
    pending = await store.executions.get("proj-1", "count-a")
    assert pending is not None
    running = pending.model_copy(update={"status": ExecutionStatus.RUNNING})
    assert await store.executions.replace(pending, running) is not None
    ended = f.pending("count-d").model_copy(update={"status": ExecutionStatus.COMPLETED})
    await store.executions.create(ended)  # ended: history, not counted
    assert await store.executions.count_live_by_status() == {
        ExecutionStatus.RUNNING: 1,
        ExecutionStatus.SUSPENDED: 2,
    }


async def test_due_deadlines_lists_suspensions_past_their_next_deadline(store: Store) -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def waiting(execution_id: str, deadlines: Deadlines, project: str = "proj-1") -> Execution:
        base = f.suspended(execution_id)
        assert base.suspension is not None
        suspension = base.suspension.model_copy(update={"deadlines": deadlines})
        return base.model_copy(update={"project_id": project, "suspension": suspension})

    hour = timedelta(hours=1)
    executions = [
        waiting("dl-expired", Deadlines(expire_at=now - hour)),
        waiting("dl-remind", Deadlines(remind_at=now - 2 * hour, expire_at=now + hour)),
        waiting("dl-future", Deadlines(expire_at=now + hour)),
        waiting(
            "dl-fired",
            Deadlines(remind_at=now - hour, expire_at=now + hour, fired=[DeadlineKind.REMIND]),
        ),
        waiting("dl-other-project", Deadlines(escalate_at=now), project="proj-2"),
        waiting("dl-none", Deadlines(expire_at=None)),
    ]
    for execution in executions:
        await store.executions.create(execution)
    due = await store.executions.due_deadlines(now)
    assert [e.execution_id for e in due] == ["dl-remind", "dl-expired", "dl-other-project"]
    assert [e.execution_id for e in await store.executions.due_deadlines(now, limit=1)] == [
        "dl-remind"
    ]
    # Fired, the remind deadline is no longer due; its expiry still lies ahead.
    stored = await store.executions.get("proj-1", "dl-remind")
    assert stored is not None and stored.suspension and stored.suspension.deadlines
    fired = stored.suspension.deadlines.with_fired(DeadlineKind.REMIND)
    updated = stored.model_copy(
        update={"suspension": stored.suspension.model_copy(update={"deadlines": fired})}
    )
    assert await store.executions.replace(stored, updated) is not None
    due = await store.executions.due_deadlines(now)
    assert [e.execution_id for e in due] == ["dl-expired", "dl-other-project"]


async def test_an_execution_leaves_the_sweeps_when_it_stops_waiting(store: Store) -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    base = f.suspended("dl-decided")
    assert base.suspension is not None
    waiting = base.model_copy(
        update={
            "suspension": base.suspension.model_copy(
                update={"deadlines": Deadlines(expire_at=now - timedelta(minutes=1))}
            )
        }
    )
    created, _ = await store.executions.create(waiting)
    assert [e.execution_id for e in await store.executions.due_deadlines(now)] == ["dl-decided"]
    decided = await store.executions.replace(
        created, created.model_copy(update={"status": ExecutionStatus.RESUMING, "epoch": 2})
    )
    assert decided is not None
    assert await store.executions.due_deadlines(now) == []

    request, _ = await store.executions.create(f.pending("ud-retried"))
    marked = await store.executions.replace(
        request, request.model_copy(update={"undelivered_since": now - timedelta(minutes=5)})
    )
    assert marked is not None
    assert [e.execution_id for e in await store.executions.undelivered_before(now)] == [
        "ud-retried"
    ]
    assert [e.version for e in await store.executions.undelivered_before(now)] == [2]
    cleared = await store.executions.replace(
        marked, marked.model_copy(update={"undelivered_since": None})
    )
    assert cleared is not None
    assert await store.executions.undelivered_before(now) == []
