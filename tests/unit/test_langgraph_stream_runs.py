"""Streams as LangChain's UIs read them, over the in-process services served on loopback (so a
stream arrives event by event): a stream names its run (``Content-Location``, ``Location``), a
join replays what a dropped stream missed after its ``Last-Event-ID``, and
``on_disconnect='cancel'`` cancels a run under way, never one that stopped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from shared.domain.cancellation import still_under_way
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import execution_id_for, turn_key
from shared.store.api_keys import Role, create_key
from tests.eventually import eventually
from tests.factories import pending
from tests.live_gateway import served
from tests.unit.inprocess import World
from tests.unit.test_execution_stream import gateway

LANGGRAPH = "/langgraph/projects/p1/workspaces/w1"
USE_STREAM = {
    "stream_mode": ["values", "messages-tuple", "custom"],
    "stream_subgraphs": True,
    "on_disconnect": "cancel",
}
"""What useStream sends by default (a stream that is not resumable)."""


def parse(block: str) -> dict[str, Any] | None:
    event: dict[str, Any] = {}
    for line in block.splitlines():
        name, _, value = line.partition(": ")
        if name in ("event", "id"):
            event[name] = value
        elif name == "data":
            event["data"] = json.loads(value)
    return event if "event" in event else None


async def events(response: httpx.Response, stop_after: int | None = None) -> list[dict[str, Any]]:
    """The events of a streamed response; with ``stop_after``, only that many (the client then
    goes away)."""
    got: list[dict[str, Any]] = []
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            event = parse(block)
            if event is not None:
                got.append(event)
            if stop_after is not None and len(got) >= stop_after:
                return got
    return got


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway(world, monkeypatch) as asgi, served(asgi) as live:
        yield live


async def new_thread(http: httpx.AsyncClient) -> str:
    return str((await http.post(f"{LANGGRAPH}/threads", json={})).json()["thread_id"])


def said(text: str) -> dict[str, Any]:
    return {
        "messages": [{"id": "h-1", "type": "human", "content": [{"type": "text", "text": text}]}]
    }


async def test_a_stream_names_its_run_and_a_join_replays_what_a_dropped_stream_missed(
    http: httpx.AsyncClient,
) -> None:
    thread = await new_thread(http)
    body = {"assistant_id": "claims-assistant", "input": said("refund CLM-4821"), **USE_STREAM}
    async with http.stream("POST", f"{LANGGRAPH}/threads/{thread}/runs/stream", json=body) as r:
        assert r.status_code == 200
        seen = await events(r, stop_after=3)  # then the connection drops
        location, content_location = r.headers["location"], r.headers["content-location"]
    run = seen[0]["data"]["run_id"]
    assert content_location == f"/threads/{thread}/runs/{run}"
    assert location == (
        f"/threads/{thread}/runs/{run}/stream?stream_mode=values&stream_mode=messages-tuple"
        "&stream_mode=custom&stream_subgraphs=true"
    )
    # The same stream again, from its start, once the run stopped at its review.
    joined = f"{LANGGRAPH}{location}"

    async def replayed() -> list[dict[str, Any]]:
        async with http.stream("GET", joined, headers={"Last-Event-ID": "-1"}) as replay:
            return await events(replay)

    everything = await eventually(
        replayed, lambda got: "__interrupt__" in got[-1].get("data", {}), what="the review"
    )
    assert [e["id"] for e in everything[:3]] == [e["id"] for e in seen]
    async with http.stream("GET", joined, headers={"Last-Event-ID": seen[-1]["id"]}) as rest:
        assert rest.headers["content-location"] == content_location
        missed = await events(rest)
    assert seen + missed == everything
    names = [e["event"] for e in everything]
    assert names[0] == "metadata" and names[-1] == "values"
    # Whole messages of the subgraph (its model does not stream), its custom data, namespaced.
    assert any(n.startswith("custom|assistant:") for n in names), names
    whole = [e["data"][0] for e in everything if e["event"].startswith("messages|")]
    assert [m["type"] for m in whole] == ["ai", "tool", "ai"], whole
    assert whole[0]["tool_calls"][0]["name"] == "lookup_claim"
    # Joined without Last-Event-ID once the run stopped: nothing more to send.
    async with http.stream("GET", joined) as later:
        assert await events(later) == []


@pytest.mark.parametrize(
    ("status", "epoch", "under_way"),
    [
        (ExecutionStatus.PENDING, 0, True),  # a new turn, or one queued behind another
        (ExecutionStatus.RUNNING, 1, True),
        (ExecutionStatus.RESUMING, 2, True),  # the decision's run, starting
        (ExecutionStatus.SUSPENDED, 1, False),  # stopped at its review
        (ExecutionStatus.SUSPENDED, 1, False),  # ...or a decision's run waiting to be applied
        (ExecutionStatus.RUNNING, 3, False),  # a later run followed this one
        (ExecutionStatus.COMPLETED, 2, False),
        (ExecutionStatus.CANCELLED, 3, False),
    ],
)
def test_only_a_run_under_way_is_cancelled_when_its_client_goes(
    status: ExecutionStatus, epoch: int, under_way: bool
) -> None:
    """Which runs ``on_disconnect='cancel'`` cancels (the disconnect itself is tested end to
    end: tests/e2e/test_langgraph_streams.py; here the services run inline in the request)."""
    execution = pending().model_copy(update={"status": status, "epoch": epoch})
    assert still_under_way(execution, 2) is under_way


async def test_a_run_stopped_at_its_review_is_not_cancelled_when_its_client_goes(
    world: World, http: httpx.AsyncClient
) -> None:
    thread = await new_thread(http)
    body = {"assistant_id": "conversation", "input": said("a refund please"), **USE_STREAM}
    async with http.stream("POST", f"{LANGGRAPH}/threads/{thread}/runs/stream", json=body) as r:
        sent = await events(r)
    assert "__interrupt__" in sent[-1]["data"]
    execution_id = execution_id_for("p1", "w1", turn_key(thread, 1))
    assert (await world.execution(execution_id)).status is ExecutionStatus.SUSPENDED
    # The review is still there to answer, and a decision's own stream that ends normally
    # cancels nothing either.
    resume = {"assistant_id": "conversation", "command": {"resume": "approve"}, **USE_STREAM}
    async with http.stream("POST", f"{LANGGRAPH}/threads/{thread}/runs/stream", json=resume) as r:
        resumed = await events(r)
    assert "reviewer said approve" in json.dumps(resumed[-1]["data"])
    assert (await world.execution(execution_id)).status is ExecutionStatus.COMPLETED
    # The first run joined now: its events again, but its stop is the decision's run's start
    # (not kept), so the replay ends with what it recorded.
    first = sent[0]["data"]["run_id"]
    joined = f"{LANGGRAPH}/threads/{thread}/runs/{first}/stream"
    async with http.stream("GET", joined, headers={"Last-Event-ID": "-1"}) as replay:
        again = await events(replay)
    assert again == [e for e in sent if not e["id"].startswith("000001.9999.")]
    assert again[0]["event"] == "metadata"


async def test_a_join_that_cancels_on_disconnect_needs_an_owner(
    world: World, http: httpx.AsyncClient
) -> None:
    thread = await new_thread(http)
    first = await http.post(
        f"{LANGGRAPH}/threads/{thread}/runs",
        json={"assistant_id": "conversation", "input": said("wait 2")},
    )
    run = first.json()["run_id"]
    _, member = await create_key(world.store.api_keys, project_id="p1", role=Role.MEMBER, name="m")
    async with http.stream(
        "GET",
        f"{LANGGRAPH}/threads/{thread}/runs/{run}/stream",
        params={"cancel_on_disconnect": "1"},
        headers={"Authorization": f"Bearer {member}"},
    ) as refused:
        assert refused.status_code == 403
    bad = await http.get(
        f"{LANGGRAPH}/threads/{thread}/runs/{run}/stream", headers={"Last-Event-ID": "what"}
    )
    assert bad.status_code == 400 and bad.json()["type"].endswith("/invalid-last-event-id")


async def test_a_wait_that_would_cancel_on_disconnect_is_refused_before_anything_starts(
    world: World, http: httpx.AsyncClient
) -> None:
    thread = await new_thread(http)
    body = {"assistant_id": "conversation", "input": said("hi"), "on_disconnect": "cancel"}
    refused = await http.post(f"{LANGGRAPH}/threads/{thread}/runs/wait", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["type"].endswith("/unsupported-option")
    assert "runs.stream" in refused.json()["detail"]
    assert (await http.get(f"{LANGGRAPH}/threads/{thread}/runs")).json() == []


async def test_a_stream_filtered_by_subgraph_is_refused(http: httpx.AsyncClient) -> None:
    thread = await new_thread(http)
    body = {"assistant_id": "conversation", "input": said("hi"), "stream_subgraphs": True}
    refused = await http.post(
        f"{LANGGRAPH}/threads/{thread}/runs/stream", params={"namespace": "sub"}, json=body
    )
    assert refused.status_code == 400, refused.text
    assert "namespace" in refused.json()["detail"]
