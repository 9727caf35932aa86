"""Issue 36, item 2, over the in-process services: LangGraph's crons API on the workspace's
crons, and the orchestrators' sweep firing each tick once however many sweep, a tick whose
start was cut short started by the next sweep, the same run; missed ticks by the catch-up
policy; refusals as LangGraph's server gives them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.orchestrator.crons import UNSTARTED_AFTER, CronSweeper
from services.orchestrator.thread_erasure import ThreadEraser
from services.orchestrator.thread_retention import ThreadRetention
from shared.domain.crons import tick_id, tick_thread_id
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import execution_id_for, turn_key
from shared.metrics import CRON_TICKS
from shared.store.api_keys import Role, create_key
from shared.store.crons import Tenant, TickClaim
from tests.unit.inprocess import World

W1 = "/langgraph/projects/p1/workspaces/w1"
REFUND = "refund-approval"
INPUT = {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}
EVERY_5S = "* * * * * */5"
START_BODY = {"assistant_id": REFUND, "input": INPUT}
TENANT = Tenant("p1", "w1")


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(settings, store=world.store, publisher=world.bus)
    _, owner = await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="o", email="o@example.com"
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {owner}"},
    ) as client:
        yield client


def sweeper(world: World, clock: Clock, owner: str) -> CronSweeper:
    return CronSweeper(store=world.store, orchestrator=world.orchestrator, clock=clock, owner=owner)


async def created(http: httpx.AsyncClient, **extra: Any) -> dict[str, Any]:
    body = {"assistant_id": REFUND, "schedule": EVERY_5S, "input": INPUT, **extra}
    response = await http.post(f"{W1}/runs/crons", json=body)
    assert response.status_code == 200, response.text
    cron: dict[str, Any] = response.json()
    return cron


async def test_two_sweepers_fire_each_tick_once(world: World, http: httpx.AsyncClient) -> None:
    cron = await created(http, metadata={"team": "ops"})
    first = datetime.fromisoformat(cron["next_run_date"])
    assert cron["thread_id"] is None and cron["enabled"]
    assert cron["user_id"].startswith("key:") and cron["user_id"].endswith(" (o)")  # who made it
    clock = Clock(first + timedelta(milliseconds=300))
    a, b = sweeper(world, clock, "a"), sweeper(world, clock, "b")
    fired = [await a.sweep(), await b.sweep()]
    clock.now += timedelta(seconds=5)
    fired += [await b.sweep(), await a.sweep()]
    assert sorted(fired) == [0, 0, 1, 1]
    for tick in (first, first + timedelta(seconds=5)):
        thread_id = tick_thread_id(cron["cron_id"], tick)
        thread = (await http.get(f"{W1}/threads/{thread_id}")).json()
        assert thread["status"] == "interrupted", thread
        assert thread["metadata"]["cron_id"] == cron["cron_id"]
        assert thread["metadata"]["team"] == "ops"
        runs = (await http.get(f"{W1}/threads/{thread_id}/runs")).json()
        assert len(runs) == 1, runs
        execution = await world.execution(execution_id_for("p1", "w1", turn_key(thread_id, 1)))
        first_line = execution.audit[0]
        assert first_line.actor.endswith(" (o)") and first_line.action == "created", first_line
        assert first_line.reason == f"tick {tick.isoformat()} of cron {cron['cron_id']}"
    claims = await world.store.crons.claims_of(TENANT, cron["cron_id"])
    assert [c.tick for c in claims] == [first, first + timedelta(seconds=5)]
    assert all(c.started for c in claims)
    stored = await world.store.crons.get(TENANT, cron["cron_id"])
    assert stored is not None and stored.next_run_date == first + timedelta(seconds=10)


async def test_a_tick_whose_start_was_cut_short_is_started_by_the_next_sweep_once(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await created(http)
    tick = datetime.fromisoformat(cron["next_run_date"])
    thread_id = tick_thread_id(cron["cron_id"], tick)
    # A replica claimed the tick and died before starting it, and before moving the cron on.
    await world.store.crons.claim_tick(
        TickClaim(
            claim_id=tick_id(cron["cron_id"], tick),
            cron_id=cron["cron_id"],
            project_id="p1",
            workspace_id="w1",
            tick=tick,
            thread_id=thread_id,
            execution_id=execution_id_for("p1", "w1", turn_key(thread_id, 1)),
            claimed_by="dead",
            claimed_at=tick,
        )
    )
    clock = Clock(tick + timedelta(seconds=1))
    survivor = sweeper(world, clock, "survivor")
    assert await survivor.sweep() == 0  # claimed already; too recent to be taken for lost
    assert (await http.get(f"{W1}/threads/{thread_id}")).status_code == 404
    clock.now = tick + UNSTARTED_AFTER + timedelta(seconds=1)
    # The lost claim is started now, and the ticks due since (one, run_once) fire.
    assert await survivor.sweep() == 2
    assert await survivor.sweep() == 0
    runs = (await http.get(f"{W1}/threads/{thread_id}/runs")).json()
    assert len(runs) == 1, runs
    assert (await world.store.crons.unstarted(clock.now)) == []


async def test_missed_ticks_run_once_or_are_skipped(world: World, http: httpx.AsyncClient) -> None:
    once = await created(http)
    skip = await created(http, schedule="0 9 * * *", catch_up="skip")
    # Three days and an hour on: the skip cron's latest tick is an hour old, past the grace.
    later = datetime.fromisoformat(skip["next_run_date"]) + timedelta(days=3, hours=1)
    clock = Clock(later)
    assert await sweeper(world, clock, "a").sweep() == 1  # the every-5s cron, once
    assert len(await world.store.crons.claims_of(TENANT, once["cron_id"])) == 1
    assert await world.store.crons.claims_of(TENANT, skip["cron_id"]) == []
    moved = await world.store.crons.get(TENANT, skip["cron_id"])
    assert moved is not None and moved.next_run_date > later


async def test_the_crons_api_searches_counts_updates_and_deletes(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await created(http)
    other = await created(http, schedule="0 9 * * *")
    listed = (await http.post(f"{W1}/runs/crons/search", json={"assistant_id": REFUND})).json()
    assert {c["cron_id"] for c in listed} == {cron["cron_id"], other["cron_id"]}
    assert (await http.post(f"{W1}/runs/crons/count", json={})).json() == 2
    elsewhere = "/langgraph/projects/p1/workspaces/w2"
    assert (await http.post(f"{elsewhere}/runs/crons/count", json={})).json() == 0
    assert (await http.get(f"{elsewhere}/runs/crons/{cron['cron_id']}")).status_code == 404

    patched = await http.patch(
        f"{W1}/runs/crons/{cron['cron_id']}", json={"schedule": "0 10 * * *", "enabled": False}
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["schedule"] == "0 10 * * *" and body["enabled"] is False
    assert datetime.fromisoformat(body["next_run_date"]).hour == 10
    # Disabled: never due, however late.
    clock = Clock(datetime.now(UTC) + timedelta(days=2))
    await sweeper(world, clock, "a").sweep()
    assert await world.store.crons.claims_of(TENANT, cron["cron_id"]) == []

    deleted = await http.delete(f"{W1}/runs/crons/{cron['cron_id']}")
    assert deleted.status_code == 204
    assert (await http.delete(f"{W1}/runs/crons/{cron['cron_id']}")).status_code == 404
    assert (await http.post(f"{W1}/runs/crons/count", json={})).json() == 1


@pytest.mark.parametrize(
    ("body", "status", "problem"),
    [
        ({"schedule": "every day"}, 422, "invalid-schedule"),
        ({"schedule": "0 9 * * *", "timezone": "Mars/Olympus"}, 422, "invalid-schedule"),
        ({"config": {"recursion_limit": 3}}, 400, "unsupported-option"),
        ({"assistant_id": "no-such-agent"}, 400, "unknown-agent"),  # as runs.create
        ({"webhook": "http://127.0.0.1/hook"}, 422, "webhook-refused"),
        ({"input": {"messages": 5}}, 400, None),
    ],
)
async def test_a_cron_is_checked_as_its_run_would_be_when_it_is_made(
    world: World, http: httpx.AsyncClient, body: dict[str, Any], status: int, problem: str | None
) -> None:
    asked = {"assistant_id": REFUND, "schedule": EVERY_5S, "input": INPUT, **body}
    refused = await http.post(f"{W1}/runs/crons", json=asked)
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    if problem is not None:
        assert refused.json()["type"].endswith(f"/{problem}")
    assert (await http.post(f"{W1}/runs/crons/count", json={})).json() == 0


async def thread_cron(http: httpx.AsyncClient, thread_id: str, **extra: Any) -> dict[str, Any]:
    created = await http.post(f"{W1}/threads", json={"thread_id": thread_id})
    assert created.status_code == 200, created.text
    body = {"assistant_id": REFUND, "schedule": EVERY_5S, "input": INPUT, **extra}
    response = await http.post(f"{W1}/threads/{thread_id}/runs/crons", json=body)
    assert response.status_code == 200, response.text
    cron: dict[str, Any] = response.json()
    return cron


def turn_id(thread_id: str, turn: int) -> str:
    return execution_id_for("p1", "w1", turn_key(thread_id, turn))


async def test_a_thread_crons_ticks_are_its_next_turns_queued_behind_a_review(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await thread_cron(http, "t1")
    assert cron["thread_id"] == "t1" and cron["on_run_completed"] is None, cron
    first = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(first + timedelta(milliseconds=300))
    a, b = sweeper(world, clock, "a"), sweeper(world, clock, "b")
    assert [await a.sweep(), await b.sweep()] == [1, 0]
    assert (await world.execution(turn_id("t1", 1))).status is ExecutionStatus.SUSPENDED
    # The next tick finds turn 1 waiting for its review: enqueue, after it.
    clock.now += timedelta(seconds=5)
    assert [await b.sweep(), await a.sweep()] == [1, 0]
    queued = await world.execution(turn_id("t1", 2))
    assert queued.status is ExecutionStatus.PENDING and queued.input.turn is not None
    assert queued.input.turn.after == turn_id("t1", 1)
    claims = await world.store.crons.claims_of(TENANT, cron["cron_id"])
    assert [c.claim_id for c in claims] == [
        tick_id(cron["cron_id"], first),
        tick_id(cron["cron_id"], first + timedelta(seconds=5)),
    ]
    assert queued.input.turn.request_id == claims[1].claim_id and all(c.started for c in claims)
    assert queued.audit[0].reason == f"tick {claims[1].tick.isoformat()} of cron {cron['cron_id']}"
    # Its review answered, turn 1 ends and the tick's turn runs, to its own review.
    await world.decide(turn_id("t1", 1), "approve")
    assert (await world.execution(turn_id("t1", 1))).status is ExecutionStatus.COMPLETED
    assert (await world.execution(turn_id("t1", 2))).status is ExecutionStatus.SUSPENDED
    runs = (await http.get(f"{W1}/threads/t1/runs")).json()
    assert len(runs) == 3, runs  # turn 1 to its review and on after it, turn 2 to its review
    thread = (await http.get(f"{W1}/threads/t1")).json()
    assert thread["status"] == "interrupted" and "cron_id" not in thread["metadata"], thread


async def test_reject_skips_a_tick_that_finds_its_thread_busy(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await thread_cron(http, "t2", multitask_strategy="reject")
    first = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(first + timedelta(milliseconds=300))
    skipping = sweeper(world, clock, "a")
    assert await skipping.sweep() == 1
    busy_before = CRON_TICKS.labels("busy")._value.get()
    clock.now += timedelta(seconds=5)
    assert await skipping.sweep() == 0  # turn 1 waits for its review: the tick is skipped
    assert CRON_TICKS.labels("busy")._value.get() == busy_before + 1
    assert await world.store.executions.get("p1", turn_id("t2", 2)) is None
    claims = await world.store.crons.claims_of(TENANT, cron["cron_id"])
    assert len(claims) == 2 and all(c.started for c in claims)
    stored = await world.store.crons.get(TENANT, cron["cron_id"])
    assert stored is not None and stored.next_run_date == first + timedelta(seconds=10)


async def test_a_thread_ticks_start_cut_short_starts_its_stored_turn_not_another(
    world: World, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    cron = await thread_cron(http, "t3")
    tick = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(tick + timedelta(milliseconds=300))

    async def dies(event: object) -> None:
        raise ConnectionError("the replica died before it announced the turn")

    with monkeypatch.context() as patched:
        patched.setattr(world.orchestrator, "on_scheduled", dies)
        with pytest.raises(ConnectionError):
            await sweeper(world, clock, "dead").sweep()
    stored = await world.execution(turn_id("t3", 1))
    assert stored.status is ExecutionStatus.PENDING and stored.epoch == 0
    [claim] = await world.store.crons.claims_of(TENANT, cron["cron_id"])
    assert not claim.started and claim.execution_id is None
    clock.now = tick + UNSTARTED_AFTER + timedelta(seconds=1)
    survivor = sweeper(world, clock, "survivor")
    # The lost tick's stored turn is started (and the ticks due since, one, queued after it).
    assert await survivor.sweep() == 2
    assert (await world.execution(turn_id("t3", 1))).status is ExecutionStatus.SUSPENDED
    later = await world.execution(turn_id("t3", 2))
    assert later.input.turn is not None and later.input.turn.request_id != claim.claim_id
    assert await world.store.executions.get("p1", turn_id("t3", 3)) is None
    assert await world.store.crons.unstarted(clock.now) == []


@pytest.mark.parametrize(
    ("thread", "body", "status", "problem"),
    [
        ("nowhere", {}, 404, "thread-not-found"),
        ("t4", {"assistant_id": "conversation"}, 409, "assistant-mismatch"),
    ],
)
async def test_a_cron_on_a_thread_is_refused_where_its_ticks_could_not_be_turns(
    world: World,
    http: httpx.AsyncClient,
    thread: str,
    body: dict[str, Any],
    status: int,
    problem: str,
) -> None:
    await http.post(f"{W1}/threads", json={"thread_id": "t4"})
    ran = await http.post(
        f"{W1}/threads/t4/runs/wait", json={"assistant_id": REFUND, "input": INPUT}
    )
    assert ran.status_code == 200, ran.text
    asked = {"assistant_id": REFUND, "schedule": EVERY_5S, "input": INPUT, **body}
    refused = await http.post(f"{W1}/threads/{thread}/runs/crons", json=asked)
    assert refused.status_code == status, refused.text
    assert refused.json()["type"].endswith(f"/{problem}"), refused.text
    assert (await http.post(f"{W1}/runs/crons/count", json={})).json() == 0


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
async def test_a_tick_that_replaces_the_threads_turn_cancels_it_and_runs_after_it(
    world: World, http: httpx.AsyncClient, policy: str
) -> None:
    """``interrupt`` / ``rollback``: the tick's turn replaces the one waiting for its review,
    which is cancelled saying by which cron; the tick's turn runs on the state it stopped at
    (interrupt) or the state before it (rollback: here the graph's empty state)."""
    await http.post(f"{W1}/threads", json={"thread_id": "t6"})
    ran = await http.post(f"{W1}/threads/t6/runs/wait", json={**START_BODY})
    assert ran.json()["__interrupt__"], ran.text
    body = {**START_BODY, "schedule": EVERY_5S, "multitask_strategy": policy}
    made = await http.post(f"{W1}/threads/t6/runs/crons", json=body)
    assert made.status_code == 200, made.text
    cron = made.json()
    clock = Clock(datetime.fromisoformat(cron["next_run_date"]) + timedelta(milliseconds=300))
    assert await sweeper(world, clock, "a").sweep() == 1
    replaced = await world.execution(turn_id("t6", 1))
    assert replaced.status is ExecutionStatus.CANCELLED
    assert any(
        f"a tick of cron {cron['cron_id']} (multitask_strategy={policy})" in (line.reason or "")
        for line in replaced.audit
    ), replaced.audit
    tick = await world.execution(turn_id("t6", 2))
    assert tick.status is ExecutionStatus.SUSPENDED and tick.input.turn is not None
    assert tick.input.turn.after == turn_id("t6", 1)
    assert tick.input.turn.base == (turn_id("t6", 1) if policy == "interrupt" else None)


async def test_only_an_owner_makes_a_cron_that_replaces_turns(
    world: World, http: httpx.AsyncClient
) -> None:
    _, member = await create_key(
        world.store.api_keys, project_id="p1", role=Role.MEMBER, name="m", email="m@e.com"
    )
    await http.post(f"{W1}/threads", json={"thread_id": "t7"})
    as_member = {"authorization": f"Bearer {member}"}
    for policy, status in (("interrupt", 403), ("rollback", 403), ("enqueue", 200)):
        body = {**START_BODY, "schedule": EVERY_5S, "multitask_strategy": policy}
        answer = await http.post(f"{W1}/threads/t7/runs/crons", json=body, headers=as_member)
        assert answer.status_code == status, answer.text


async def erase_nothing(thread_ids: Sequence[str]) -> None:
    """The checkpoints' eraser: the in-process sandbox's saver keeps them, harmlessly."""


async def test_a_ticks_thread_is_deleted_once_its_run_ended_unless_the_cron_keeps_it(
    world: World, http: httpx.AsyncClient
) -> None:
    """``on_run_completed``: "delete" (LangGraph's default) deletes the tick's thread once its
    run has ended, a run waiting for a review keeping it; "keep" keeps it."""
    deleting, keeping = await created(http), await created(http, on_run_completed="keep")
    assert (deleting["on_run_completed"], keeping["on_run_completed"]) == ("delete", "keep")
    tick = datetime.fromisoformat(deleting["next_run_date"])
    clock = Clock(tick + timedelta(milliseconds=300))
    assert await sweeper(world, clock, "a").sweep() == 2
    deleted_id = tick_thread_id(deleting["cron_id"], tick)
    kept_id = tick_thread_id(keeping["cron_id"], datetime.fromisoformat(keeping["next_run_date"]))
    eraser = ThreadEraser(store=world.store, checkpoints=erase_nothing, keep_audit=False)

    def retention(now: datetime) -> ThreadRetention:
        return ThreadRetention(
            store=world.store, eraser=eraser, clock=lambda: now, retry_after=timedelta(seconds=1)
        )

    assert await retention(clock.now).sweep() == 0  # waiting for its review: kept
    assert (await http.get(f"{W1}/threads/{deleted_id}")).json()["status"] == "interrupted"
    for thread_id in (deleted_id, kept_id):
        execution_id = execution_id_for("p1", "w1", turn_key(thread_id, 1))
        outcome = await world.decide(execution_id, "approve")
        assert outcome.event is not None, outcome
        assert (await world.execution(execution_id)).status is ExecutionStatus.COMPLETED
    assert await retention(clock.now + timedelta(seconds=2)).sweep() == 1
    assert (await http.get(f"{W1}/threads/{deleted_id}")).status_code == 404
    assert (await http.get(f"{W1}/threads/{kept_id}")).json()["status"] == "idle"


async def test_the_sweep_forgets_ticks_fired_longer_ago_than_kept(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await created(http, schedule="0 9 * * *")
    tick = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(tick + timedelta(milliseconds=300))
    kept = timedelta(days=30)
    sweeping = CronSweeper(
        store=world.store, orchestrator=world.orchestrator, clock=clock, claims_kept=kept
    )
    assert await sweeping.sweep() == 1
    clock.now += timedelta(days=29)
    await sweeping.sweep()  # that day's tick, within the grace: fired too
    assert len(await world.store.crons.claims_of(TENANT, cron["cron_id"])) == 2
    clock.now += timedelta(days=2)
    await sweeping.sweep()
    left = await world.store.crons.claims_of(TENANT, cron["cron_id"])
    assert [c.tick for c in left] == [tick + timedelta(days=29), tick + timedelta(days=31)]
