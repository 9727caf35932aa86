"""Issue 20, item 1: execution streams are pushed, not polled. A stream reads the store once, when
it opens (or reopens with Last-Event-ID); everything after comes through ``execution.activity``
(services/gateway/feed.py). Proved by counting the gateway's reads of executions and progress:
on the tests' direct bus, and in embedded mode on the in-process bus and SQLite, across a
gateway restart."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from pymongo.errors import ServerSelectionTimeoutError
from structlog.testing import capture_logs

from interlock.dev import DevSettings, embedded
from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.gateway.auth import KeyRechecks
from services.gateway.feed import ExecutionFeed
from services.gateway.stream import KeyGuard
from services.orchestrator import state_machine as sm
from services.orchestrator.app import register as register_orchestrator
from services.orchestrator.thread_erasure import saver_eraser
from services.sandbox.app import publish_agent_versions
from services.sandbox.app import register as register_sandbox
from shared.activity import CHANGED_IN_HEADER, ExecutionActivity
from shared.bus import Delivery, ListenerHost
from shared.events import DecisionSubmitted, encode_event
from shared.inprocess_bus import InProcessBus
from shared.senders import MessageSigner
from shared.store.api_keys import ApiKey, Role, create_key
from shared.store.memory.api_keys import InMemoryApiKeys
from shared.store.ports import Store
from shared.store.progress import ProgressEntry
from tests.counting_store import CountingStore
from tests.factories import decision, outside_producer, suspended
from tests.live_gateway import served
from tests.stream_events import Event, read_until, statuses
from tests.unit.inprocess import World

OPENING_READS = {"executions.get": 1, "progress.after": 1}
"""What a stream costs the store: the execution and its progress, once, when it opens."""


@asynccontextmanager
async def live_gateway(
    store: Store,
    bus: ListenerHost,
    monkeypatch: pytest.MonkeyPatch,
    *,
    project: str,
    **settings: Any,
) -> AsyncIterator[tuple[httpx.AsyncClient, CountingStore]]:
    """A gateway on ``store`` (its reads of executions and progress counted) and ``bus``, served
    on loopback, called with a fresh owner key of ``project``."""
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    counting = CountingStore(store)
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", **settings)
    app = create_app(built, store=counting, publisher=bus, listeners=bus)  # type: ignore[arg-type]
    _, secret = await create_key(store.api_keys, project_id=project, role=Role.OWNER, name="t")
    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway", headers=headers
        ) as http,
        served(http) as live,
    ):
        yield live, counting


def nodes(events: list[Event]) -> list[str]:
    return [data["node"] for kind, _, data in events if kind == "update"]


# --- the feed -----------------------------------------------------------------------------------


def delivery(execution_id: str, body: bytes) -> Delivery:
    return Delivery(topic="execution.activity", partition=0, offset=0, key=execution_id, body=body)


def progress(project_id: str, execution_id: str, key: str) -> bytes:
    entry = ProgressEntry(key=key, kind="update", data={"node": "n"})
    activity = ExecutionActivity.progressed(project_id, execution_id, [entry])
    return activity.model_dump_json().encode()


async def test_a_watch_hears_its_execution_of_its_project_only() -> None:
    feed = ExecutionFeed()
    with feed.watch("p1", "e1") as watch:
        feed.heard(delivery("e1", progress("p1", "e1", "a")))
        # The same execution id in another project is another tenant's execution.
        feed.heard(delivery("e1", progress("p2", "e1", "b")))
        feed.heard(delivery("e2", progress("p1", "e2", "c")))
        arrived = await watch.next(0.01)
    assert [a.progress[0].key for a in arrived if a.progress] == ["a"]
    assert feed.watching == 0


async def test_nobody_watching_means_nothing_is_decoded() -> None:
    feed = ExecutionFeed()
    with capture_logs() as logs:
        feed.heard(delivery("e1", b"not json at all"))  # dropped by its key, unread
        with feed.watch("p1", "e1") as watch:
            feed.heard(delivery("e1", b"not json at all"))
            feed.heard(delivery("e1", progress("p1", "e1", "a")))
            arrived = await watch.next(0.01)
    assert [log["event"] for log in logs] == ["activity.undecodable"]
    assert len(arrived) == 1


async def test_a_watch_that_falls_behind_is_marked_not_buffered_without_bound() -> None:
    feed = ExecutionFeed(capacity=2)
    with feed.watch("p1", "e1") as watch:
        for key in ("a", "b", "c"):
            feed.heard(delivery("e1", progress("p1", "e1", key)))
        assert watch.overflowed
        assert len(await watch.next(0.01)) == 2


async def test_a_watch_with_nothing_new_waits_and_returns_empty() -> None:
    feed = ExecutionFeed()
    with feed.watch("p1", "e1") as watch:
        assert await watch.next(0.01) == []


# --- streams over the direct bus ---------------------------------------------------------------


async def test_an_open_stream_is_fed_by_the_bus_without_reading_the_store(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await world.invoke("refund-approval", "Refund claim CLM-4821")
    url = f"/api/v1/projects/p1/executions/{started.execution_id}/stream"
    async with (
        live_gateway(world.store, world.bus, monkeypatch, project="p1", topic_prefix="mem.") as (
            live,
            reads,
        ),
        aconnect_sse(live, "GET", url, params={"workspace_id": "w1"}) as source,
    ):
        events = source.aiter_sse()
        before = await read_until(events, "interrupt")
        assert statuses(before) == ["pending", "running", "suspended"]
        assert reads.snapshot() == OPENING_READS
        # The decision goes through the bus (not this gateway): everything the stream shows of
        # it was pushed.
        await world.decide(started.execution_id, "approve", "ok")
        after = await read_until(events, "end")
        assert statuses(after) == ["resuming", "running", "completed"]
        assert nodes(after) == ["review", "issue_refund"]
        assert after[-1][2]["result"]["outcome"] == "refunded"
        assert reads.snapshot() == OPENING_READS


async def test_a_change_too_big_to_carry_its_view_costs_one_read(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    waiting, _ = await world.store.executions.create(suspended())
    topic = world.topics.activity
    url = f"/api/v1/projects/{waiting.project_id}/executions/{waiting.execution_id}/stream"
    async with (
        live_gateway(
            world.store, world.bus, monkeypatch, project=waiting.project_id, topic_prefix="mem."
        ) as (live, reads),
        aconnect_sse(live, "GET", url, params={"workspace_id": waiting.workspace_id}) as source,
    ):
        events = source.aiter_sse()
        await read_until(events, "interrupt")
        # The orchestrator records a rejected decision and announces it without the view.
        rejected = sm.rejected_decision(waiting, decision(waiting, "maybe"), "not allowed")
        stored = await world.store.executions.replace(waiting, rejected)
        assert stored is not None
        announced = ExecutionActivity.changed(stored)
        assert announced.change is not None
        announced.change.view = None
        await world.bus.publish(announced, topic, key=stored.execution_id)
        audit = await read_until(events, "audit")
        assert audit[-1][2]["action"] == "decision.rejected"
        assert reads.snapshot() == {"executions.get": 2, "progress.after": 1}


# --- embedded mode: the in-process bus and SQLite, across a gateway restart ---------------------


async def test_embedded_streams_are_pushed_and_resume_after_a_gateway_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(tmp_path / "ledger.jsonl"))
    producers, producer = outside_producer(tmp_path)  # decides on the bus, as registered
    settings = DevSettings(
        data_dir=tmp_path / "data",
        kafka_bootstrap_servers="unused:9092",
        decision_producers_file=producers,
    )
    async with embedded(settings) as wiring:
        await wiring.store.ensure_indexes()
        register_orchestrator(
            wiring.bus,
            settings,
            wiring.store,
            wiring.publisher,
            erase_checkpoints=saver_eraser(wiring.checkpointer),
        )
        _, graphs = register_sandbox(
            wiring.bus, settings, wiring.store, wiring.publisher, wiring.checkpointer
        )
        await publish_agent_versions(graphs, wiring.store)
        bus = wiring.bus
        assert isinstance(bus, InProcessBus)
        await bus.start()
        try:
            await stream_across_a_restart(wiring.store, bus, settings, monkeypatch, producer)
        finally:
            await bus.stop()


async def stream_across_a_restart(
    store: Store,
    bus: InProcessBus,
    settings: DevSettings,
    monkeypatch: pytest.MonkeyPatch,
    producer: MessageSigner,
) -> None:
    base = "/api/v1/projects/demo"
    params = {"workspace_id": "default"}
    async with live_gateway(store, bus, monkeypatch, project="demo") as (first, _):
        invoked = await first.post(
            f"{base}/workspaces/default/invoke",
            json={"agent": "chain-approval", "message": "2"},
        )
        assert invoked.status_code == 202, invoked.text
        execution_id = invoked.json()["execution_id"]
        url = f"{base}/executions/{execution_id}/stream"
        async with aconnect_sse(first, "GET", url, params=params) as source:
            before = await read_until(source.aiter_sse(), "interrupt")
        assert before[-1][2]["generation"] == 1
    # The first gateway is gone. A decision is taken meanwhile (through another gateway); the
    # stream reopens on a new one with the last id it saw.
    async with live_gateway(store, bus, monkeypatch, project="demo") as (second, reads):
        decided = await second.post(
            f"{base}/executions/{execution_id}/resume",
            params=params,
            json={"decision": "approve", "generation": 1},
        )
        assert decided.status_code == 202, decided.text
        reads.counts.clear()  # the resume's own reads are not the stream's
        headers = {"Last-Event-ID": before[-1][1]}
        async with aconnect_sse(second, "GET", url, params=params, headers=headers) as source:
            events = source.aiter_sse()
            again = await read_until(events, "interrupt")
            assert again[-1][2]["generation"] == 2
            assert statuses(again)[0] == "resuming"
            assert reads.snapshot() == OPENING_READS
            # The second decision comes from the bus side; the open stream is pushed the rest.
            second_decision = DecisionSubmitted(
                execution_id=execution_id,
                project_id="demo",
                workspace_id="default",
                suspension_id=2,
                decision="approve",
            )
            signed = producer.headers(encode_event(second_decision))
            await bus.publish(
                second_decision, settings.topics.decisions, key=execution_id, headers=signed
            )
            rest = await read_until(events, "end")
        assert statuses(rest) == ["resuming", "running", "completed"]
        assert reads.snapshot() == OPENING_READS
    # Across both gateways each audit entry came once, in order.
    trail = [data["to_status"] for kind, _, data in before + again + rest if kind == "status"]
    assert trail == [
        "pending", "running", "suspended", "resuming", "running", "suspended",
        "resuming", "running", "completed",
    ]  # fmt: skip


# --- the workspace's change stream (the review page's live list) -------------------------------


async def test_a_workspace_change_stream_is_pushed_its_own_workspace_only(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "/api/v1/projects/p1/changes"
    async with (
        live_gateway(world.store, world.bus, monkeypatch, project="p1", topic_prefix="mem.") as (
            live,
            reads,
        ),
        aconnect_sse(live, "GET", url, params={"workspace_id": "w1"}) as source,
    ):
        events = source.aiter_sse()
        # Another workspace of the project, and another project's execution of the same id.
        for project, workspace in (("p1", "w2"), ("p2", "w1")):
            other = suspended("other").model_copy(
                update={"project_id": project, "workspace_id": workspace}
            )
            await world.bus.publish(
                ExecutionActivity.changed(other),
                world.topics.activity,
                key="other",
                headers={CHANGED_IN_HEADER: project},
            )
        started = await world.invoke("refund-approval", "Refund claim CLM-4821")
        seen = []
        async for event in events:
            if event.event == "change":
                seen.append(json.loads(event.data))
                if seen[-1]["status"] == "suspended":
                    break
        assert {view["execution_id"] for view in seen} == {started.execution_id}
        assert seen[-1]["allowed_decisions"] == ["approve", "reject"]
        # The stream reads nothing: the page reads its list itself, once, after opening it.
        assert reads.snapshot() == {}


# --- key re-checks: one timer per key, not a wake-up per stream ---------------------------------


async def test_a_keys_streams_share_one_recheck_timer_and_its_revocation_ends_them() -> None:
    keys = InMemoryApiKeys()
    first, _ = await create_key(keys, project_id="p1", role=Role.OWNER, name="a")
    other, _ = await create_key(keys, project_id="p1", role=Role.OWNER, name="b")
    guard = KeyGuard(KeyRechecks(keys, interval=0.02))
    feed = ExecutionFeed()
    with (
        feed.watch("p1", "e1") as one,
        feed.watch("p1", "e2") as two,
        feed.watch("p1", "e3") as three,
        guard.guarding(first, one),
        guard.guarding(first, two),
        guard.guarding(other, three),
    ):
        assert guard.timers == 2
        assert await keys.revoke("p1", first.key_id)
        # Each waits up to its lifetime: only the revocation wakes the first key's streams.
        assert await one.next(5) == [] and await two.next(5) == []
        assert one.ended == two.ended == "the API key is no longer valid"
        assert await three.next(0.1) == [] and three.ended is None
    assert guard.timers == 0


async def test_a_key_that_cannot_be_read_again_ends_its_streams() -> None:
    class Unreachable(InMemoryApiKeys):
        async def get(self, key_id: str) -> ApiKey | None:
            raise ServerSelectionTimeoutError("the database is away")

    keys = Unreachable()
    key, _ = await create_key(keys, project_id="p1", role=Role.OWNER, name="a")
    guard = KeyGuard(KeyRechecks(keys, interval=0.02))
    with ExecutionFeed().watch("p1", "e1") as watch, guard.guarding(key, watch):
        assert await watch.next(5) == []
        assert watch.ended == "the API key could not be checked again: reconnect"
