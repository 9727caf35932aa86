"""Issue 36, item 2: Interlock's own crons API over the in-process services: the same crons as
LangGraph's (one cron book), made, listed, read, changed and deleted by workspace; what a cron
fired listed with the executions it started; a cron continuing a session; the refusals, each a
problem with the native API's 400s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.orchestrator.crons import CronSweeper
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import execution_id_for, turn_key
from shared.store.api_keys import Role, create_key
from tests.unit.inprocess import World
from tests.unit.test_crons import Clock

CRONS = "/api/v1/projects/p1/crons"
W1 = {"workspace_id": "w1"}
REFUND = "refund-approval"
EVERY_5S = "* * * * * */5"


@pytest.fixture
async def keys(world: World) -> dict[str, str]:
    made = {}
    for role, name in ((Role.OWNER, "owner"), (Role.READ_ONLY, "viewer")):
        _, made[name] = await create_key(
            world.store.api_keys, project_id="p1", role=role, name=name, email=f"{name}@e.com"
        )
    return made


@pytest.fixture
async def http(
    world: World, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(settings, store=world.store, publisher=world.bus)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://gateway",
        headers={"authorization": f"Bearer {keys['owner']}"},
    ) as client:
        yield client


async def made(http: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    body = {"agent": REFUND, "schedule": EVERY_5S, "message": "Refund claim CLM-4821", **fields}
    response = await http.post(CRONS, params=W1, json=body)
    assert response.status_code == 201, response.text
    cron: dict[str, Any] = response.json()
    return cron


async def test_a_cron_is_made_listed_read_changed_and_deleted(http: httpx.AsyncClient) -> None:
    cron = await made(http, metadata={"team": "ops"})
    assert (cron["agent"], cron["session_id"], cron["busy_session_policy"]) == (
        REFUND,
        None,
        "enqueue",
    )
    assert cron["input"] == {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}
    assert cron["requested_by"].endswith(" (owner)") and cron["metadata"] == {"team": "ops"}
    other = await made(http, agent="outreach", message="hi")
    listed = (await http.get(CRONS, params=W1)).json()["items"]
    assert [c["cron_id"] for c in listed] == [other["cron_id"], cron["cron_id"]]  # newest first
    only = (await http.get(CRONS, params={**W1, "agent": REFUND})).json()["items"]
    assert [c["cron_id"] for c in only] == [cron["cron_id"]]
    assert (await http.get(CRONS, params={"workspace_id": "w2"})).json()["items"] == []
    url = f"{CRONS}/{cron['cron_id']}"
    assert (await http.get(url, params=W1)).json() == cron
    assert (await http.get(url, params={"workspace_id": "w2"})).status_code == 404

    changed = await http.patch(url, params=W1, json={"schedule": "0 10 * * *", "enabled": False})
    assert changed.status_code == 200, changed.text
    assert changed.json()["enabled"] is False
    assert datetime.fromisoformat(changed.json()["next_run_date"]).hour == 10
    assert (await http.delete(url, params={"workspace_id": "w2"})).status_code == 404
    assert (await http.delete(url, params=W1)).status_code == 204
    assert (await http.get(url, params=W1)).status_code == 404
    # One book: LangGraph's API sees the same crons.
    langgraph = "/langgraph/projects/p1/workspaces/w1/runs/crons"
    seen = (await http.post(f"{langgraph}/search", json={})).json()
    assert [c["cron_id"] for c in seen] == [other["cron_id"]]


async def test_the_ticks_say_which_execution_each_started(
    world: World, http: httpx.AsyncClient
) -> None:
    cron = await made(http)
    await http.post("/langgraph/projects/p1/workspaces/w1/threads", json={"thread_id": "s1"})
    on_session = await made(http, session_id="s1", busy_session_policy="reject")
    assert on_session["session_id"] == "s1"
    first = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(first + timedelta(milliseconds=300))
    sweeper = CronSweeper(store=world.store, orchestrator=world.orchestrator, clock=clock)
    assert await sweeper.sweep() == 2
    clock.now += timedelta(seconds=5)
    assert await sweeper.sweep() == 1  # the session waits for a review: its tick is skipped

    ticks = (await http.get(f"{CRONS}/{cron['cron_id']}/ticks", params=W1)).json()["items"]
    assert [t["started"] for t in ticks] == [True, True]
    for tick in ticks:
        execution = await world.execution(tick["execution_id"])
        assert execution.status is ExecutionStatus.SUSPENDED and execution.agent == REFUND
    session_ticks = (await http.get(f"{CRONS}/{on_session['cron_id']}/ticks", params=W1)).json()[
        "items"
    ]
    assert [t["execution_id"] for t in session_ticks] == [
        execution_id_for("p1", "w1", turn_key("s1", 1)),
        None,  # skipped: the session was busy
    ]
    assert all(t["session_id"] == "s1" for t in session_ticks)
    elsewhere = await http.get(f"{CRONS}/{cron['cron_id']}/ticks", params={"workspace_id": "w2"})
    assert elsewhere.status_code == 404
    # Deleted, what it fired stays on record; a cron that never was is a 404.
    assert (await http.delete(f"{CRONS}/{cron['cron_id']}", params=W1)).status_code == 204
    kept = (await http.get(f"{CRONS}/{cron['cron_id']}/ticks", params=W1)).json()["items"]
    assert kept == ticks
    assert (await http.get(f"{CRONS}/no-such-cron/ticks", params=W1)).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "problem"),
    [
        ({"schedule": "every day"}, 400, "invalid-schedule"),
        ({"timezone": "Mars/Olympus"}, 400, "invalid-schedule"),
        ({"input": {"messages": []}}, 400, None),  # a message and an input
        ({"message": None}, 400, None),  # neither
        ({"agent": "no-such-agent"}, 400, "unknown-agent"),
        ({"webhook": "http://127.0.0.1/hook"}, 422, "webhook-refused"),
        ({"session_id": "nowhere"}, 404, "session-not-found"),
        ({"busy_session_policy": "sometimes"}, 400, None),
    ],
)
async def test_a_cron_is_refused_as_its_run_would_be(
    http: httpx.AsyncClient, body: dict[str, Any], status: int, problem: str | None
) -> None:
    asked = {"agent": REFUND, "schedule": EVERY_5S, "message": "Refund claim CLM-4821", **body}
    refused = await http.post(CRONS, params=W1, json=asked)
    assert refused.status_code == status, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    if problem is not None:
        assert refused.json()["type"].endswith(f"/{problem}"), refused.text
    assert (await http.get(CRONS, params=W1)).json()["items"] == []


async def test_a_viewer_reads_crons_and_makes_none(
    http: httpx.AsyncClient, keys: dict[str, str]
) -> None:
    cron = await made(http)
    viewer = {"authorization": f"Bearer {keys['viewer']}"}
    assert (await http.get(CRONS, params=W1, headers=viewer)).status_code == 200
    body = {"agent": REFUND, "schedule": EVERY_5S, "message": "x"}
    for refused in (
        await http.post(CRONS, params=W1, json=body, headers=viewer),
        await http.patch(
            f"{CRONS}/{cron['cron_id']}", params=W1, json={"enabled": False}, headers=viewer
        ),
        await http.delete(f"{CRONS}/{cron['cron_id']}", params=W1, headers=viewer),
    ):
        assert refused.status_code == 403, refused.text


async def test_the_ticks_listed_are_the_latest(world: World, http: httpx.AsyncClient) -> None:
    cron = await made(http)
    first = datetime.fromisoformat(cron["next_run_date"])
    clock = Clock(first + timedelta(milliseconds=300))
    sweeper = CronSweeper(store=world.store, orchestrator=world.orchestrator, clock=clock)
    for _ in range(3):
        assert await sweeper.sweep() == 1
        clock.now += timedelta(seconds=5)
    url = f"{CRONS}/{cron['cron_id']}/ticks"
    latest = (await http.get(url, params={**W1, "limit": 2})).json()["items"]
    assert [datetime.fromisoformat(t["tick"]) for t in latest] == [
        first + timedelta(seconds=5),
        first + timedelta(seconds=10),
    ]
    assert (await http.get(url, params={**W1, "limit": 201})).status_code == 400
