"""Issue 31, findings 3, 4 and 7, over the in-process services: a key confined to one workspace
learns nothing of another's threads through any LangGraph route (thread ids are unique per
workspace: an id used elsewhere answers exactly like a free one, and both workspaces create it
independently); a run naming another assistant than its thread's is a 409 naming both; and
what each LangGraph request reads of the store, counted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import execution_id_for, turn_key
from shared.store.api_keys import Role, create_key
from tests.counting_store import CountedCalls, CountingStore
from tests.unit.inprocess import World

PREFIX = "/langgraph/projects/{project_id}/workspaces/{workspace_id}"
SHARED = "shared-thread-1"
"""A thread id used in workspace w1, then tried from w2."""
FRESH = "never-used-thread"
REFUND = "refund-approval"
INPUT = {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}
RESUME = {"assistant_id": REFUND, "command": {"resume": "approve"}}
START = {"assistant_id": REFUND, "input": INPUT}
CRON = {"assistant_id": REFUND, "schedule": "0 9 * * *", "input": INPUT}
KEYLESS = {("GET", "/info"), ("GET", "/ok")}
"""Routes that need no key and answer the same for every project and workspace, as on
LangGraph's server (services/gateway/langgraph/meta.py): nothing of a workspace to learn."""


@dataclass
class Setup:
    http: httpx.AsyncClient
    counting: CountingStore
    owner: str
    """An owner of every workspace of p1: the requester of w1's thread."""
    confined: str
    """An owner confined to w2."""
    run_id: str
    """The run of w1's thread that stopped at its interrupt."""
    cron_id: str
    """A cron of w1's, which no route may show or change from w2."""

    def url(self, workspace: str, path: str) -> str:
        return f"/langgraph/projects/p1/workspaces/{workspace}{path}"

    def as_key(self, secret: str) -> dict[str, str]:
        return {"authorization": f"Bearer {secret}"}


@pytest.fixture
async def setup(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    counting = CountingStore(world.store)
    counting.threads = CountedCalls(world.store.threads, counting.counts, "threads")
    # Every route twice per key, back to back: past the default burst of 40 on a fast run.
    built = GatewaySettings(
        kafka_bootstrap_servers="unused:9092", topic_prefix="mem.", rate_limit_burst=1000
    )
    app = create_app(built, store=counting, publisher=world.bus)  # type: ignore[arg-type]
    keys = world.store.api_keys
    _, owner = await create_key(
        keys, project_id="p1", role=Role.OWNER, name="o", email="requester@example.com"
    )
    _, confined = await create_key(
        keys,
        project_id="p1",
        role=Role.OWNER,
        name="c",
        workspaces=["w2"],
        email="confined@example.com",
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {owner}"},
    ) as http:
        w1 = "/langgraph/projects/p1/workspaces/w1"
        created = await http.post(
            f"{w1}/threads", json={"thread_id": SHARED, "metadata": {"case": "w1-secret"}}
        )
        assert created.status_code == 200, created.text
        run = await http.post(f"{w1}/threads/{SHARED}/runs", json=START)
        assert run.status_code == 200, run.text
        # And an item of w1's store, which no route may show w2.
        put = await http.put(
            f"{w1}/store/items",
            json={"namespace": ["facts"], "key": SHARED, "value": {"case": "w1-secret"}},
        )
        assert put.status_code == 204, put.text
        cron = await http.post(f"{w1}/runs/crons", json={**CRON, "metadata": {"case": "w1-secret"}})
        assert cron.status_code == 200, cron.text
        yield Setup(http, counting, owner, confined, run.json()["run_id"], cron.json()["cron_id"])


def langgraph_routes(http: httpx.AsyncClient) -> set[tuple[str, str]]:
    """Every LangGraph route the gateway serves, as its OpenAPI document lists them."""
    transport = http._transport
    assert isinstance(transport, httpx.ASGITransport)
    paths: dict[str, dict[str, Any]] = transport.app.openapi()["paths"]  # type: ignore[attr-defined]
    return {
        (method.upper(), path.removeprefix(PREFIX))
        for path, operations in paths.items()
        if path.startswith("/langgraph/")
        for method in operations
    }


def calls(
    thread: str, run: str, cron: str
) -> dict[tuple[str, str], tuple[str, dict[str, Any] | None]]:
    """Every LangGraph route, with a request that would act on ``thread`` if it were here."""
    return {
        ("POST", "/assistants/search"): ("/assistants/search", {}),
        ("GET", "/assistants/{assistant_id}"): (f"/assistants/{REFUND}", None),
        ("POST", "/assistants/count"): ("/assistants/count", {}),
        ("GET", "/assistants/{assistant_id}/graph"): (f"/assistants/{REFUND}/graph", None),
        ("GET", "/assistants/{assistant_id}/schemas"): (f"/assistants/{REFUND}/schemas", None),
        ("GET", "/assistants/{assistant_id}/subgraphs"): (f"/assistants/{REFUND}/subgraphs", None),
        ("GET", "/assistants/{assistant_id}/subgraphs/{namespace}"): (
            f"/assistants/{REFUND}/subgraphs/review",
            None,
        ),
        ("PUT", "/store/items"): (
            "/store/items",
            {"namespace": ["facts"], "key": thread, "value": {"case": "x"}},
        ),
        ("GET", "/store/items"): (f"/store/items?namespace=facts&key={thread}", None),
        ("DELETE", "/store/items"): ("/store/items", {"namespace": ["facts"], "key": thread}),
        ("POST", "/store/items/search"): ("/store/items/search", {"namespace_prefix": ["facts"]}),
        ("POST", "/store/namespaces"): ("/store/namespaces", {}),
        ("GET", "/info"): ("/info", None),
        ("GET", "/ok"): ("/ok", None),
        ("POST", "/threads"): ("/threads", {"thread_id": thread, "if_exists": "do_nothing"}),
        ("POST", "/threads/search"): ("/threads/search", {"ids": [thread]}),
        ("GET", "/threads/{thread_id}"): (f"/threads/{thread}", None),
        ("GET", "/threads/{thread_id}/state"): (f"/threads/{thread}/state", None),
        ("PATCH", "/threads/{thread_id}"): (f"/threads/{thread}", {"metadata": {"case": "x"}}),
        ("DELETE", "/threads/{thread_id}"): (f"/threads/{thread}", None),
        ("POST", "/threads/{thread_id}/history"): (f"/threads/{thread}/history", {}),
        ("POST", "/threads/{thread_id}/state"): (
            f"/threads/{thread}/state",
            {"values": {"messages": [{"role": "ai", "content": "x"}]}},
        ),
        ("POST", "/threads/{thread_id}/copy"): (f"/threads/{thread}/copy", None),
        ("GET", "/threads/{thread_id}/runs"): (f"/threads/{thread}/runs", None),
        ("POST", "/threads/{thread_id}/runs"): (f"/threads/{thread}/runs", RESUME),
        ("POST", "/runs"): ("/runs", START),
        ("POST", "/threads/{thread_id}/runs/wait"): (f"/threads/{thread}/runs/wait", RESUME),
        ("POST", "/runs/wait"): ("/runs/wait", START),
        ("POST", "/runs/crons"): ("/runs/crons", {**CRON, "metadata": {"thread": thread}}),
        ("POST", "/threads/{thread_id}/runs/crons"): (f"/threads/{thread}/runs/crons", CRON),
        ("POST", "/runs/crons/search"): ("/runs/crons/search", {}),
        ("POST", "/runs/crons/count"): ("/runs/crons/count", {}),
        ("GET", "/runs/crons/{cron_id}"): (f"/runs/crons/{cron}", None),
        ("PATCH", "/runs/crons/{cron_id}"): (f"/runs/crons/{cron}", {"enabled": False}),
        ("DELETE", "/runs/crons/{cron_id}"): (f"/runs/crons/{cron}", None),
        ("POST", "/threads/{thread_id}/runs/stream"): (f"/threads/{thread}/runs/stream", RESUME),
        ("POST", "/runs/stream"): ("/runs/stream", START),
        ("GET", "/threads/{thread_id}/runs/{run}"): (f"/threads/{thread}/runs/{run}", None),
        ("GET", "/threads/{thread_id}/runs/{run}/join"): (
            f"/threads/{thread}/runs/{run}/join",
            None,
        ),
        ("GET", "/threads/{thread_id}/runs/{run}/stream"): (
            f"/threads/{thread}/runs/{run}/stream",
            None,
        ),
        ("POST", "/threads/{thread_id}/runs/{run}/cancel"): (
            f"/threads/{thread}/runs/{run}/cancel",
            None,
        ),
    }


async def call(
    setup: Setup, secret: str, workspace: str, method: str, path: str, body: Any
) -> httpx.Response:
    return await setup.http.request(
        method, setup.url(workspace, path), json=body, headers=setup.as_key(secret)
    )


async def assert_w1_untouched(world: World, setup: Setup) -> None:
    execution = await world.execution(execution_id_for("p1", "w1", turn_key(SHARED, 1)))
    assert execution.status is ExecutionStatus.SUSPENDED
    assert execution.suspension is not None
    assert (
        await world.store.decisions.holder(
            execution.execution_id, execution.suspension.suspension_id
        )
        is None
    )
    thread = await setup.http.get(setup.url("w1", f"/threads/{SHARED}"))
    assert thread.json()["status"] == "interrupted"
    assert thread.json()["metadata"]["case"] == "w1-secret"
    item = await setup.http.get(setup.url("w1", f"/store/items?namespace=facts&key={SHARED}"))
    assert item.json()["value"] == {"case": "w1-secret"}, item.text
    cron = await setup.http.get(setup.url("w1", f"/runs/crons/{setup.cron_id}"))
    assert cron.json()["enabled"] and cron.json()["metadata"] == {"case": "w1-secret"}, cron.text


async def test_every_route_is_covered_here(setup: Setup) -> None:
    """A LangGraph route added later must be added to ``calls`` (and so to the tests below)."""
    assert langgraph_routes(setup.http) == set(calls(SHARED, setup.run_id, setup.cron_id))


async def test_a_confined_key_gets_404_on_every_route_of_another_workspace(
    world: World, setup: Setup
) -> None:
    for route, (path, body) in calls(SHARED, setup.run_id, setup.cron_id).items():
        method = route[0]
        answer = await call(setup, setup.confined, "w1", method, path, body)
        if route in KEYLESS:
            async with httpx.AsyncClient(
                transport=setup.http._transport, base_url="http://gateway"
            ) as keyless:
                unknown = await keyless.get(f"/langgraph/projects/p9/workspaces/w9{path}")
            assert answer.status_code == unknown.status_code == 200, f"{path}: {answer.text}"
            assert answer.json() == unknown.json(), path
            continue
        assert answer.status_code == 404, f"{method} {path}: {answer.text}"
        assert answer.headers["content-type"] == "application/problem+json"
        assert "w1-secret" not in answer.text
    await assert_w1_untouched(world, setup)


async def test_a_thread_id_used_elsewhere_answers_exactly_like_a_free_one(
    world: World, setup: Setup
) -> None:
    """From w2, on every route, ``SHARED`` (w1's) and ``FRESH`` (nobody's) get the same answer,
    once the ids are set aside: no oracle. Runs come before creates (a create makes the id w2's
    too), and stateless routes make threads of their own, compared by status only."""
    used, free = (
        calls(SHARED, setup.run_id, setup.cron_id),
        calls(FRESH, setup.run_id, setup.cron_id),
    )
    order = sorted(used, key=lambda route: route == ("POST", "/threads"))
    for route in order:
        method = route[0]
        (path, body), (free_path, free_body) = used[route], free[route]
        answer = await call(setup, setup.confined, "w2", method, path, body)
        same = await call(setup, setup.confined, "w2", method, free_path, free_body)
        assert answer.status_code == same.status_code, f"{route}: {answer.text} / {same.text}"
        assert "w1-secret" not in answer.text, route
        if route[1].startswith("/threads/{thread_id}"):
            assert answer.status_code == 404, f"{route}: {answer.text}"
        if route[1].startswith("/threads") and route[1] != "/threads/search":
            assert answer.text.replace(SHARED, "ID") == same.text.replace(FRESH, "ID") or (
                route == ("POST", "/threads")  # times and metadata differ: compared below
            ), route
    await assert_w1_untouched(world, setup)


async def test_search_never_returns_another_workspaces_thread(world: World, setup: Setup) -> None:
    """The probe: a w2 key invoked with ``Idempotency-Key: langgraph-thread:<w1's thread>``,
    then searched by status, and got w1's thread record with its metadata."""
    invoked = await setup.http.post(
        "/api/v1/projects/p1/workspaces/w2/invoke",
        json={"agent": REFUND, "message": "Refund claim CLM-4821"},
        headers={**setup.as_key(setup.confined), "Idempotency-Key": turn_key(SHARED, 1)},
    )
    assert invoked.status_code == 202, invoked.text
    for body in ({"status": "interrupted"}, {"status": "error"}, {}, {"ids": [SHARED]}):
        found = await call(setup, setup.confined, "w2", "POST", "/threads/search", body)
        assert found.status_code == 200, found.text
        assert found.json() == [], (body, found.text)
    # In w1 the thread is there, found by each.
    for body in ({"status": "interrupted"}, {}, {"ids": [SHARED, FRESH]}):
        found = await call(setup, setup.owner, "w1", "POST", "/threads/search", body)
        assert [t["thread_id"] for t in found.json()] == [SHARED], (body, found.text)


async def test_both_workspaces_create_the_same_thread_id_independently(
    world: World, setup: Setup
) -> None:
    mine = await call(
        setup,
        setup.confined,
        "w2",
        "POST",
        "/threads",
        {"thread_id": SHARED, "metadata": {"case": "w2"}},
    )
    assert mine.status_code == 200, mine.text
    assert mine.json()["metadata"] == {"case": "w2"} and mine.json()["status"] == "idle"
    again = await call(setup, setup.confined, "w2", "POST", "/threads", {"thread_id": SHARED})
    assert again.status_code == 409 and again.json()["type"].endswith("/thread-exists")
    kept = await call(
        setup,
        setup.confined,
        "w2",
        "POST",
        "/threads",
        {"thread_id": SHARED, "if_exists": "do_nothing"},
    )
    assert kept.json()["metadata"] == {"case": "w2"}
    # w2's thread runs an execution of its own.
    waited = await call(setup, setup.confined, "w2", "POST", f"/threads/{SHARED}/runs/wait", START)
    assert waited.status_code == 200 and waited.json()["__interrupt__"], waited.text
    done = await call(setup, setup.confined, "w2", "POST", f"/threads/{SHARED}/runs/wait", RESUME)
    assert done.json()["outcome"] == "refunded", done.text
    await assert_w1_untouched(world, setup)
    # No squatting the other way either: an id w2 took first is free in w1.
    first = await call(setup, setup.confined, "w2", "POST", "/threads", {"thread_id": "w2-first"})
    assert first.status_code == 200, first.text
    then = await call(setup, setup.owner, "w1", "POST", "/threads", {"thread_id": "w2-first"})
    assert then.status_code == 200 and then.json()["metadata"] == {}, then.text


async def test_a_run_naming_another_assistant_than_the_threads_is_409_naming_both(
    world: World, setup: Setup
) -> None:
    """The probe: a resume naming sql-ops on a refund-approval thread approved the refund."""
    second = await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="s", email="s@example.com"
    )
    for path in ("runs", "runs/wait", "runs/stream"):
        for body in (
            {"assistant_id": "sql-ops", "command": {"resume": "approve"}},
            {"assistant_id": "sql-ops", "input": INPUT},
            {"assistant_id": "sql-ops", "input": {"messages": [["user", "something else"]]}},
        ):
            answer = await call(setup, second[1], "w1", "POST", f"/threads/{SHARED}/{path}", body)
            assert answer.status_code == 409, answer.text
            refused = answer.json()
            assert refused["type"].endswith("/assistant-mismatch"), refused
            assert REFUND in refused["detail"] and "sql-ops" in refused["detail"], refused
            assert (refused["thread_assistant"], refused["assistant_id"]) == (REFUND, "sql-ops")
    # An assistant that is not registered is named the same way: it is not the thread's.
    unknown = await call(
        setup,
        second[1],
        "w1",
        "POST",
        f"/threads/{SHARED}/runs",
        {**RESUME, "assistant_id": "nope"},
    )
    assert unknown.status_code == 409 and "nope" in unknown.json()["detail"], unknown.text
    await assert_w1_untouched(world, setup)
    approved = await call(setup, second[1], "w1", "POST", f"/threads/{SHARED}/runs/wait", RESUME)
    assert approved.json()["refund_id"].startswith("RF-"), approved.text


READS = ("threads.", "executions.")


async def test_what_each_request_reads_of_the_store(world: World, setup: Setup) -> None:
    async def counted(method: str, path: str, body: Any = None) -> dict[str, int]:
        setup.counting.counts.clear()
        answer = await call(setup, setup.owner, "w1", method, path, body)
        assert answer.status_code in (200, 202), answer.text
        return {k: v for k, v in setup.counting.counts.items() if k.startswith(READS)}

    assert await counted("POST", "/threads", {"thread_id": "t-new"}) == {"threads.create": 1}
    # A thread's latest turn: the turn its hint names and the one after, at once (the hint
    # trails a turn being started).
    one_thread = {"threads.get": 1, "executions.get": 2}
    assert await counted("GET", f"/threads/{SHARED}") == one_thread
    assert await counted("GET", f"/threads/{SHARED}/state") == one_thread
    assert await counted("POST", "/threads/search", {"ids": [SHARED, "t-new", FRESH]}) == {
        "threads.get_many": 1,
        "executions.get": 4,
    }
    # An input: the thread, then, its hint saying it has started no turn, the first turn's
    # insert with no read before it, and the thread's turn hint; nothing when the run stops
    # (the change that says so carries the execution).
    assert await counted("POST", "/threads/t-new/runs/wait", START) == {
        "threads.get": 1,
        "executions.create": 1,
        "threads.note_turn": 1,
    }
    # A stateless run: its thread is created, so it has no turn to read.
    assert await counted("POST", "/runs/wait", START) == {
        "threads.create": 1,
        "executions.create": 1,
        "threads.note_turn": 1,
    }
    # A decision: the thread, the turn its hint names (waiting for this review), and the
    # resume route's read.
    assert await counted("POST", "/threads/t-new/runs/wait", RESUME) == {
        "threads.get": 1,
        "executions.get": 2,
    }
    assert await counted("GET", f"/threads/{SHARED}/runs/{setup.run_id}") == one_thread
    # A join reads the run's turn again once it is watched.
    assert await counted("GET", f"/threads/{SHARED}/runs/{setup.run_id}/join") == {
        "threads.get": 1,
        "executions.get": 3,
    }
