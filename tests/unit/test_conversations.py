"""Issue 33 over the in-process services: a LangGraph thread carries many runs, each turn
starting from where the one before left the conversation; a busy thread (here, one waiting for
a review) follows the run's ``multitask_strategy``; the thread's runs, history and metadata read
as LangGraph's. The in-memory bus runs each publish to its end before it returns, so a turn that
is not waiting for a review has finished when its request is answered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from langchain_core.runnables import RunnableConfig

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.orchestrator.thread_erasure import ThreadEraser, saver_eraser
from services.orchestrator.thread_retention import ThreadRetention
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import turn_execution_id
from shared.store.api_keys import Role, create_key
from tests.unit.inprocess import World

CHAT = "conversation"
ROOT = "/langgraph/projects/p1/workspaces/w1"


def checkpoint_of(execution_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": execution_id, "checkpoint_ns": ""}}


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def replies(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m.get("type") == "ai"]


@pytest.fixture
async def http(world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(built, store=world.store, publisher=world.bus)  # type: ignore[arg-type]
    _, owner = await create_key(
        world.store.api_keys, project_id="p1", role=Role.OWNER, name="o", email="o@example.com"
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url=f"http://gateway{ROOT}",
        headers={"authorization": f"Bearer {owner}"},
    ) as client:
        yield client


async def new_thread(http: httpx.AsyncClient) -> str:
    created = await http.post("/threads", json={"metadata": {"case": "chat"}})
    assert created.status_code == 200, created.text
    thread_id: str = created.json()["thread_id"]
    return thread_id


async def wait(http: httpx.AsyncClient, thread_id: str, **body: Any) -> httpx.Response:
    return await http.post(f"/threads/{thread_id}/runs/wait", json={"assistant_id": CHAT, **body})


async def test_each_turn_of_a_thread_sees_the_turns_before(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    for number, text in enumerate(["hello", "my name is Ada", "what is my name?"], start=1):
        answer = await wait(http, thread_id, input=said(text))
        assert answer.status_code == 200, answer.text
        last = replies(answer.json())[-1]
        assert last.startswith(f"turn {number}: you said {text!r}"), last
    assert "'hello', 'my name is Ada'" in last
    # The state grew as LangGraph's does: three human messages, three replies.
    state = (await http.get(f"/threads/{thread_id}/state")).json()
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"] * 3
    # Each turn is an execution of its own, with its own lifecycle and audit.
    turns = [await world.execution(turn_execution_id("p1", "w1", thread_id, n)) for n in (1, 2, 3)]
    assert [t.status for t in turns] == [ExecutionStatus.COMPLETED] * 3
    assert [t.input.turn.turn for t in turns if t.input.turn] == [1, 2, 3]
    assert turns[2].input.turn is not None and turns[2].input.turn.base == turns[1].execution_id
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    assert len(runs) == 3 and {r["status"] for r in runs} == {"success"}
    history = (await http.post(f"/threads/{thread_id}/history", json={})).json()
    assert [len(h["values"]["messages"]) for h in history] == [6, 4, 2]
    # The first turn's parent is the thread's start (epoch-0, empty), as LangGraph's first
    # state has the input checkpoint before it: Agent Chat UI regenerates the first answer
    # from it.
    start = {**history[2]["checkpoint"], "checkpoint_id": "epoch-0"}
    assert [h["parent_checkpoint"] for h in history] == [
        history[1]["checkpoint"],
        history[2]["checkpoint"],
        start,
    ]


async def test_the_same_text_twice_is_two_turns(http: httpx.AsyncClient) -> None:
    thread_id = await new_thread(http)
    first = await wait(http, thread_id, input=said("yes"))
    second = await wait(http, thread_id, input=said("yes"))
    assert replies(first.json())[-1].startswith("turn 1")
    assert replies(second.json())[-1].startswith("turn 2: you said 'yes'; before: ['yes']")


async def suspended_thread(http: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    thread_id = await new_thread(http)
    await wait(http, thread_id, input=said("hello"))
    waiting = await wait(http, thread_id, input=said("refund my order"))
    assert waiting.status_code == 200, waiting.text
    [interrupt] = waiting.json()["__interrupt__"]
    return thread_id, interrupt


async def test_reject_refuses_a_new_input_while_the_thread_waits_for_a_review(
    http: httpx.AsyncClient,
) -> None:
    thread_id, _ = await suspended_thread(http)
    refused = await wait(http, thread_id, input=said("hi"), multitask_strategy="reject")
    assert refused.status_code == 409, refused.text
    assert refused.json()["type"].endswith("/thread-busy")
    assert (await http.get(f"/threads/{thread_id}")).json()["status"] == "interrupted"


async def test_enqueue_runs_a_new_input_once_the_review_is_answered(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id, interrupt = await suspended_thread(http)
    queued = await http.post(
        f"/threads/{thread_id}/runs", json={"assistant_id": CHAT, "input": said("and then?")}
    )
    assert queued.status_code == 200, queued.text
    assert queued.json()["status"] == "pending"
    assert queued.json()["multitask_strategy"] == "enqueue"
    third = await world.execution(turn_execution_id("p1", "w1", thread_id, 3))
    assert third.status is ExecutionStatus.PENDING and third.epoch == 0
    # The review is still the thread's to answer, and a decision answers it (not the queue).
    state = (await http.get(f"/threads/{thread_id}/state")).json()
    assert state["interrupts"][0]["id"] == interrupt["id"]
    waiting = (await http.post("/threads/search", json={"status": "interrupted"})).json()
    assert thread_id in [t["thread_id"] for t in waiting]
    answered = await wait(http, thread_id, command={"resume": "approve"})
    assert answered.status_code == 200, answered.text
    final = (await http.get(f"/threads/{thread_id}/state")).json()
    texts = [m["content"] for m in final["values"]["messages"] if m["type"] == "ai"]
    assert "reviewer said approve" in texts[1]
    assert texts[2].startswith("turn 3: you said 'and then?'"), texts


@pytest.mark.parametrize("policy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_end_the_review_and_run_the_new_input(
    http: httpx.AsyncClient, world: World, policy: str
) -> None:
    thread_id, _ = await suspended_thread(http)
    answer = await wait(http, thread_id, input=said("never mind"), multitask_strategy=policy)
    assert answer.status_code == 200, answer.text
    # interrupt keeps the cancelled turn's input in the state; rollback drops it, as if that
    # turn had never run.
    seen = ["hello", "refund my order"] if policy == "interrupt" else ["hello"]
    last = replies(answer.json())[-1]
    assert last == (f"turn {len(seen) + 1}: you said 'never mind'; before: {seen!r}"), last
    humans = [m["content"] for m in answer.json()["messages"] if m["type"] == "human"]
    assert humans == [*seen, "never mind"], humans
    cancelled = await world.execution(turn_execution_id("p1", "w1", thread_id, 2))
    assert cancelled.status is ExecutionStatus.CANCELLED
    assert f"multitask_strategy={policy}" in (cancelled.audit[-1].reason or "")
    assert cancelled.audit[-1].actor != "orchestrator"
    # Each run once: turn 1's, the cancelled turn's (interrupted), the new turn's.
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    assert [r["status"] for r in runs] == ["success", "interrupted", "success"], runs
    history = (await http.post(f"/threads/{thread_id}/history", json={})).json()
    if policy == "interrupt":
        # The cancelled turn shows its own state, as the turn after it started from it.
        assert [len(h["values"]["messages"]) for h in history] == [5, 3, 2], history
    else:
        assert [len(h["values"]["messages"]) for h in history] == [4, 2], history


async def test_thread_metadata_is_updated_and_searched(http: httpx.AsyncClient) -> None:
    thread_id = await new_thread(http)
    await wait(http, thread_id, input=said("hello"))
    updated = await http.patch(f"/threads/{thread_id}", json={"metadata": {"topic": "billing"}})
    assert updated.status_code == 200, updated.text
    assert updated.json()["metadata"] == {
        "case": "chat",
        "topic": "billing",
        "graph_id": CHAT,
        "assistant_id": CHAT,
    }
    found = (await http.post("/threads/search", json={"metadata": {"topic": "billing"}})).json()
    assert [t["thread_id"] for t in found] == [thread_id]
    by_graph = (await http.post("/threads/search", json={"metadata": {"graph_id": CHAT}})).json()
    assert thread_id in [t["thread_id"] for t in by_graph]
    none = (await http.post("/threads/search", json={"metadata": {"topic": "other"}})).json()
    assert none == []
    by_values = await http.post(
        "/threads/search", json={"values": {"messages": [{"content": "hello"}]}}
    )
    assert [t["thread_id"] for t in by_values.json()] == [thread_id]


async def test_a_session_of_the_native_api_is_a_conversation_and_a_thread(
    http: httpx.AsyncClient, world: World
) -> None:
    invoke = "http://gateway/api/v1/projects/p1/workspaces/w1/invoke"
    first = await http.post(invoke, json={"agent": CHAT, "message": "hi", "session_id": "s-1"})
    assert first.status_code == 202, first.text
    assert first.headers["X-Session-ID"] == "s-1"
    assert (first.json()["session_id"], first.json()["turn"]) == ("s-1", 1)
    second = await http.post(
        invoke, json={"agent": CHAT, "message": "again"}, headers={"X-Session-ID": "s-1"}
    )
    assert second.status_code == 202, second.text
    assert second.json()["turn"] == 2
    done = await world.execution(second.json()["execution_id"])
    assert done.status is ExecutionStatus.COMPLETED
    assert done.result["messages"][-1]["content"] == "turn 2: you said 'again'; before: ['hi']"
    session = await http.get(
        "http://gateway/api/v1/projects/p1/sessions/s-1", params={"workspace_id": "w1"}
    )
    assert session.status_code == 200, session.text
    assert [t["turn"] for t in session.json()["turns"]] == [2, 1]
    # The same conversation through the LangGraph API.
    thread = (await http.get("/threads/s-1")).json()
    assert len(thread["values"]["messages"]) == 4
    mismatch = await http.post(
        invoke,
        json={"agent": "refund-approval", "message": "x", "session_id": "s-1"},
    )
    assert mismatch.status_code == 409
    assert mismatch.json()["type"].endswith("/session-agent-mismatch")
    disagree = await http.post(
        invoke,
        json={"agent": CHAT, "message": "x", "session_id": "s-1"},
        headers={"X-Session-ID": "s-2"},
    )
    assert disagree.status_code == 400 and disagree.json()["type"].endswith("/session-mismatch")
    keyed = await http.post(
        invoke, json={"agent": CHAT, "message": "x", "session_id": "s-1", "idempotency_key": "k"}
    )
    assert keyed.status_code == 400, keyed.text
    missing = await http.get(
        "http://gateway/api/v1/projects/p1/sessions/none", params={"workspace_id": "w1"}
    )
    assert missing.status_code == 404


async def test_a_session_waiting_for_a_review_refuses_with_reject(http: httpx.AsyncClient) -> None:
    invoke = "http://gateway/api/v1/projects/p1/workspaces/w1/invoke"
    body = {"agent": CHAT, "session_id": "s-r"}
    await http.post(invoke, json={**body, "message": "refund it"})
    busy = await http.post(
        invoke, json={**body, "message": "hello?", "multitask_strategy": "reject"}
    )
    assert busy.status_code == 409, busy.text
    assert busy.json()["type"].endswith("/session-busy")
    loose = await http.post(
        invoke, json={"agent": CHAT, "message": "x", "multitask_strategy": "reject"}
    )
    assert loose.status_code == 400, loose.text


async def test_a_run_from_a_checkpoint_of_the_history_forks_the_thread(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    for text in ("one", "two", "three"):
        await wait(http, thread_id, input=said(text))
    history = (await http.post(f"/threads/{thread_id}/history", json={"limit": 5})).json()
    after_one = history[-1]["checkpoint"]["checkpoint_id"]
    forked = await wait(http, thread_id, input=said("branch"), checkpoint_id=after_one)
    assert forked.status_code == 200, forked.text
    assert replies(forked.json())[-1] == "turn 2: you said 'branch'; before: ['one']"
    # The thread is now on the new branch: its history is the fork and the turn it forked from.
    branch = (await http.post(f"/threads/{thread_id}/history", json={})).json()
    assert [len(h["values"]["messages"]) for h in branch] == [4, 2]
    fork = await world.execution(turn_execution_id("p1", "w1", thread_id, 4))
    assert fork.input.turn is not None
    assert fork.input.turn.base == turn_execution_id("p1", "w1", thread_id, 1)
    assert fork.audit[0].actor != "producer"
    unknown = await wait(http, thread_id, input=said("x"), checkpoint_id="turn-9-epoch-1")
    assert unknown.status_code == 404, unknown.text
    moved = await wait(http, thread_id, input=said("x"), checkpoint={"checkpoint_id": "epoch-7"})
    assert moved.status_code == 409, moved.text


async def test_a_person_updates_the_state_and_copies_the_thread(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    await wait(http, thread_id, input=said("hello"))
    written = await http.post(
        f"/threads/{thread_id}/state",
        json={"values": {"messages": [{"role": "ai", "content": "edited by a person"}]}},
    )
    assert written.status_code == 200, written.text
    assert written.json()["checkpoint"]["checkpoint_id"].startswith("turn-2-")
    state = (await http.get(f"/threads/{thread_id}/state")).json()
    assert [m["content"] for m in state["values"]["messages"]][-1] == "edited by a person"
    update = await world.execution(turn_execution_id("p1", "w1", thread_id, 2))
    assert update.input.turn is not None and update.input.turn.kind == "update"
    assert (
        update.requested_by is not None and "edited by a person" in update.input.model_dump_json()
    )
    following = await wait(http, thread_id, input=said("next"))
    assert "before: ['hello']" in replies(following.json())[-1]
    assert "edited by a person" in str(following.json()["messages"])
    # As LangGraph: a node the graph does not have is refused (a key it does not have is not).
    refused = await http.post(
        f"/threads/{thread_id}/state", json={"values": {"flag": 1}, "as_node": "nonode"}
    )
    assert refused.status_code == 400, refused.text
    assert "nonode" in refused.json()["detail"]

    copied = await http.post(f"/threads/{thread_id}/copy")
    assert copied.status_code == 200, copied.text
    copy_id = copied.json()["thread_id"]
    assert copy_id != thread_id and copied.json()["metadata"]["case"] == "chat"
    assert copied.json()["values"] == (await http.get(f"/threads/{thread_id}")).json()["values"]
    on_copy = await wait(http, copy_id, input=said("on the copy"))
    assert "before: ['hello', 'next']" in replies(on_copy.json())[-1]
    original = (await http.get(f"/threads/{thread_id}/state")).json()
    assert "on the copy" not in str(original["values"])


async def test_a_later_turn_waiting_for_review_shows_the_conversation_so_far(
    http: httpx.AsyncClient,
) -> None:
    thread_id, _ = await suspended_thread(http)
    [waiting] = (await http.get(f"/threads/{thread_id}/runs", params={"limit": 1})).json()
    execution = await http.get(
        f"http://gateway/api/v1/projects/p1/sessions/{thread_id}", params={"workspace_id": "w1"}
    )
    latest = execution.json()["turns"][0]["execution_id"]
    view = (
        await http.get(
            f"http://gateway/api/v1/projects/p1/executions/{latest}",
            params={"workspace_id": "w1"},
        )
    ).json()
    assert (view["session_id"], view["turn"]) == (thread_id, 2)
    assert view["conversation"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "turn 1: you said 'hello'; before: []"},
        {"role": "user", "content": "refund my order"},
    ]
    assert waiting["status"] == "success"


async def test_a_deleted_thread_is_gone_and_its_turns_erased(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    for text in ("hello", "again"):
        assert (await wait(http, thread_id, input=said(text))).status_code == 200
    turns = [turn_execution_id("p1", "w1", thread_id, n) for n in (1, 2)]
    assert all([await world.saver.aget_tuple(checkpoint_of(t)) for t in turns])

    assert (await http.delete(f"/threads/{thread_id}")).status_code == 204
    for gone in (
        await http.get(f"/threads/{thread_id}"),
        await http.get(f"/threads/{thread_id}/state"),
        await http.delete(f"/threads/{thread_id}"),
        await http.delete("/threads/no-such-thread"),
    ):
        assert gone.status_code == 404, gone.text
        assert gone.json()["type"].endswith("/thread-not-found")
    again = await http.post("/threads", json={"thread_id": thread_id})
    assert again.status_code == 409 and again.json()["type"].endswith("/thread-deleted")
    # The in-process bus has delivered the erasure: checkpoints gone, the audit kept (default).
    assert [await world.saver.aget_tuple(checkpoint_of(t)) for t in turns] == [None, None]
    for execution_id in turns:
        assert (await world.execution(execution_id)).status is ExecutionStatus.COMPLETED


async def test_a_thread_with_a_review_pending_is_not_deleted(http: httpx.AsyncClient) -> None:
    thread_id = await new_thread(http)
    waiting = await wait(http, thread_id, input=said("refund my order"))
    assert waiting.json()["__interrupt__"], waiting.text
    refused = await http.delete(f"/threads/{thread_id}")
    assert refused.status_code == 409, refused.text
    assert refused.json()["type"].endswith("/thread-busy")
    assert refused.json()["execution_id"] == turn_execution_id("p1", "w1", thread_id, 1)
    assert (await http.get(f"/threads/{thread_id}")).json()["status"] == "interrupted"


async def test_a_queued_turn_cancelled_while_it_waits_is_skipped_by_the_turns_after_it(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    waiting = await wait(http, thread_id, input=said("refund my order"))
    [interrupt] = waiting.json()["__interrupt__"]
    second = (
        await http.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": CHAT, "input": said("second")}
        )
    ).json()
    third = (
        await http.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": CHAT, "input": said("third")}
        )
    ).json()
    assert second["status"] == third["status"] == "pending"
    cancelled = await http.post(f"/threads/{thread_id}/runs/{second['run_id']}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    # Turn 3 still waits: turn 1's review is not answered.
    turn_three = await world.execution(turn_execution_id("p1", "w1", thread_id, 3))
    assert turn_three.status is ExecutionStatus.PENDING and turn_three.epoch == 0
    await http.post(f"/threads/{thread_id}/runs/{third['run_id']}/cancel")
    # Both queued turns cancelled: the thread is as busy as the review they waited for.
    busy = await wait(http, thread_id, input=said("x"), multitask_strategy="reject")
    assert busy.status_code == 409, busy.text
    third = (
        await http.post(
            f"/threads/{thread_id}/runs", json={"assistant_id": CHAT, "input": said("third")}
        )
    ).json()
    answered = await wait(http, thread_id, command={"resume": {interrupt["id"]: "reject"}})
    assert answered.status_code == 200, answered.text
    assert "reviewer said reject" in replies(answered.json())[-1], answered.json()
    done = (await http.get(f"/threads/{thread_id}/runs/{third['run_id']}/join")).json()
    # Turn 3 ran after turn 1, on turn 1's state: the cancelled turn's input is not in it.
    assert replies(done)[-1] == "turn 2: you said 'third'; before: ['refund my order']", done
    turn_four = await world.execution(turn_execution_id("p1", "w1", thread_id, 4))
    assert turn_four.input.turn is not None
    assert turn_four.input.turn.base == turn_execution_id("p1", "w1", thread_id, 1)
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    statuses = {r["run_id"]: r["status"] for r in runs}
    assert statuses[second["run_id"]] == "interrupted" and statuses[third["run_id"]] == "success"
    assert len(runs) == 5  # turn 1's two runs, the two cancelled turns, turn 4


async def test_a_thread_with_a_ttl_expires_from_its_last_turn(
    http: httpx.AsyncClient, world: World
) -> None:
    created = await http.post("/threads", json={"ttl": {"strategy": "delete", "ttl": 30}})
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    record = await world.store.threads.get("p1", "w1", thread_id)
    assert record is not None and record.ttl_minutes == 30 and record.expires_at is not None
    # Counted from the creation (stored to the millisecond, all a BSON date holds).
    assert timedelta(0) <= record.created_at + timedelta(minutes=30) - record.expires_at
    assert record.created_at + timedelta(minutes=30) - record.expires_at < timedelta(milliseconds=1)
    assert (await wait(http, thread_id, input=said("hello"))).status_code == 200
    after_turn = await world.store.threads.get("p1", "w1", thread_id)
    assert after_turn is not None and after_turn.expires_at is not None
    assert after_turn.expires_at > record.expires_at  # the turn restarted the clock

    eraser = ThreadEraser(store=world.store, checkpoints=saver_eraser(world.saver), keep_audit=True)
    later = after_turn.expires_at + timedelta(seconds=1)
    sweep = ThreadRetention(
        store=world.store, eraser=eraser, clock=lambda: later, retry_after=timedelta(minutes=1)
    )
    assert await sweep.sweep() == 1
    assert (await http.get(f"/threads/{thread_id}")).status_code == 404
    turn = turn_execution_id("p1", "w1", thread_id, 1)
    assert await world.saver.aget_tuple(checkpoint_of(turn)) is None


async def test_a_ttl_is_set_by_an_update_and_refused_when_it_cannot_be_kept(
    http: httpx.AsyncClient, world: World
) -> None:
    thread_id = await new_thread(http)
    record = await world.store.threads.get("p1", "w1", thread_id)
    assert record is not None and record.expires_at is None  # no ttl: kept until deleted
    updated = await http.patch(f"/threads/{thread_id}", json={"metadata": {}, "ttl": 90})
    assert updated.status_code == 200, updated.text
    record = await world.store.threads.get("p1", "w1", thread_id)
    assert record is not None and record.ttl_minutes == 90 and record.metadata == {"case": "chat"}

    pruning = await http.post("/threads", json={"ttl": {"strategy": "keep_latest", "ttl": 5}})
    assert pruning.status_code == 400, pruning.text
    assert "keep_latest" in pruning.json()["detail"]
    for nonsense in (0, -5, {"ttl": 0}, {"strategy": "delete"}, "soon"):
        refused = await http.post("/threads", json={"ttl": nonsense})
        assert refused.status_code == 400, (nonsense, refused.text)
        assert refused.json()["type"].endswith("/invalid-request")
