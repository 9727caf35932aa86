"""What a LangGraph user does with ``langgraph-sdk``, pointed at Interlock: the flows the
end-to-end tests run against the separate-process services and against ``interlock dev``.
Nothing here talks to Interlock but through the LangGraph client."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.langgraph_sdk.webhook_receiver import webhook_receiver

REFUND = "refund-approval"
REFUND_INPUT = {"messages": [{"role": "user", "content": "Refund claim CLM-4821"}]}


@dataclass(frozen=True)
class Target:
    """Where the client points: the API root of one workspace, and the keys the flows use."""

    url: str
    owner: str
    """An owner of the project: starts runs and answers them."""
    second_owner: str
    """Another person owning the project (separation of duties)."""
    other_project: str
    """An owner of another project: sees none of this one."""

    def client(self, key: str | None = None) -> LangGraphClient:
        return get_client(url=self.url, api_key=key or self.owner, timeout=60)


async def refused(call: Any, status: int) -> dict[str, Any]:
    """Await ``call`` expecting an HTTP error of ``status``; the problem document it carries."""
    with pytest.raises(httpx.HTTPStatusError) as caught:
        await call
    response = caught.value.response
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem: dict[str, Any] = response.json()
    return problem


async def refund_flow(target: Target) -> None:
    """Invoke, the interrupt in the wait result and the thread state, threads searched by
    status, an invalid resume refused, ``Command(resume=...)``, completed."""
    client = target.client()
    assistants = await client.assistants.search(limit=100)
    assert REFUND in [a["assistant_id"] for a in assistants]
    assert (await client.assistants.get(REFUND))["graph_id"] == REFUND

    thread = await client.threads.create(metadata={"case": "CLM-4821"})
    thread_id = thread["thread_id"]
    assert thread["status"] == "idle"
    first = await client.runs.wait(thread_id, REFUND, input=REFUND_INPUT)
    [interrupt] = first["__interrupt__"]
    assert interrupt["value"]["allowed_decisions"] == ["approve", "reject"]
    assert "CLM-4821" in str(interrupt["value"])
    assert any("CLM-4821" in str(m) for m in first["messages"])

    state = await client.threads.get_state(thread_id)
    [task] = state["tasks"]
    assert task["interrupts"] == [interrupt] == state["interrupts"]
    assert state["next"], state
    got = await client.threads.get(thread_id)
    assert got["status"] == "interrupted" and got["metadata"]["case"] == "CLM-4821"
    waiting = await client.threads.search(status="interrupted", limit=100)
    assert thread_id in [t["thread_id"] for t in waiting]

    problem = await refused(client.runs.wait(thread_id, REFUND, command={"resume": "maybe"}), 400)
    assert "maybe" in problem["detail"] and "approve" in problem["detail"]
    problem = await refused(
        client.runs.wait(thread_id, REFUND, command={"resume": {"decisoin": "approve"}}), 400
    )
    assert "decisoin" in problem["detail"]

    done = await client.runs.wait(
        thread_id, REFUND, command={"resume": {interrupt["id"]: {"decision": "approve"}}}
    )
    assert "__interrupt__" not in done, done
    assert done["outcome"] == "refunded" and done["refund_id"].startswith("RF-"), done
    assert (await client.threads.get(thread_id))["status"] == "idle"
    assert thread_id not in [
        t["thread_id"] for t in await client.threads.search(status="interrupted", limit=100)
    ]
    # A second answer to the same interrupt: the suspension was decided (one decision wins).
    await refused(client.runs.wait(thread_id, REFUND, command={"resume": "approve"}), 409)


async def middleware_flow(target: Target) -> None:
    """LangChain's HumanInTheLoopMiddleware: three tool calls answered approve, edit, reject in
    one ordered ``{"decisions": [...]}``."""
    client = target.client()
    thread = await client.threads.create()
    thread_id = thread["thread_id"]
    first = await client.runs.wait(
        thread_id,
        "outreach-email",
        input={"messages": [{"role": "user", "content": "send 3 emails"}]},
    )
    [interrupt] = first["__interrupt__"]
    requests = interrupt["value"]["action_requests"]
    assert [r["name"] for r in requests] == ["send_email"] * 3
    second = requests[1]["args"]
    decisions = [
        {"type": "approve"},
        {
            "type": "edit",
            "edited_action": {
                "name": "send_email",
                "args": {**second, "to": "reviewed@example.com"},
            },
        },
        {"type": "reject", "message": "not this prospect"},
    ]
    done = await client.runs.wait(
        thread_id, "outreach-email", command={"resume": {"decisions": decisions}}
    )
    assert "__interrupt__" not in done, done
    tool_results = [str(m) for m in done["messages"] if "tool" in (m.get("role"), m.get("type"))]
    assert any("not this prospect" in m for m in tool_results), done["messages"]
    assert any("reviewed@example.com" in m for m in tool_results), done["messages"]


async def drained(stream: Any) -> list[Any]:
    return [part async for part in stream]


async def stream_flow(target: Target) -> None:
    """``runs.stream`` of a run up to its interrupt, then of the resumed run to its end; a
    refused one is a problem document, not a broken stream."""
    client = target.client()
    thread_id = (await client.threads.create())["thread_id"]
    problem = await refused(drained(client.runs.stream(thread_id, REFUND)), 400)
    assert "input" in problem["detail"], problem
    await refused(drained(client.runs.stream("no-such-thread", REFUND, input=REFUND_INPUT)), 404)
    parts = [
        part
        async for part in client.runs.stream(
            thread_id, REFUND, input=REFUND_INPUT, stream_mode=["values", "updates"]
        )
    ]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and parts[0].data["run_id"]
    updates = [p.data for p in parts if p.event == "updates"]
    assert any("lookup_claim" in u for u in updates), updates
    assert "__interrupt__" in updates[-1]
    assert parts[-1].event == "values" and parts[-1].data["__interrupt__"]
    interrupt_id = parts[-1].data["__interrupt__"][0]["id"]
    resumed = [
        part
        async for part in client.runs.stream(
            thread_id,
            REFUND,
            command={"resume": {interrupt_id: "approve"}},
            stream_mode="updates",
        )
    ]
    names = [next(iter(p.data)) for p in resumed if p.event == "updates"]
    assert "issue_refund" in names, resumed
    run = await client.runs.get(thread_id, resumed[0].data["run_id"])
    assert run["status"] == "success"


async def cancel_flow(target: Target) -> None:
    """A run created without waiting, joined at its interrupt, then cancelled."""
    client = target.client()
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, REFUND, input=REFUND_INPUT)
    assert run["status"] in ("pending", "running")
    joined = await client.runs.join(thread_id, run["run_id"])
    assert joined["__interrupt__"]
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    cancelled = await client.runs.get(thread_id, run["run_id"])
    assert cancelled["status"] == "interrupted", cancelled
    assert (await client.threads.get(thread_id))["status"] == "idle"
    problem = await refused(client.runs.wait(thread_id, REFUND, command={"resume": "approve"}), 409)
    assert problem["type"].endswith("/not-suspended"), problem


async def isolation_flow(target: Target) -> None:
    """Another project's key finds nothing of this one (404s); another person may not answer
    an agent's review where the requester may not (separation of duties, 403)."""
    client = target.client()
    thread_id = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(thread_id, REFUND, input=REFUND_INPUT)
    run_id = (await client.threads.get_state(thread_id))["tasks"][0]["id"]
    assert first["__interrupt__"]
    stranger = target.client(target.other_project)
    await refused(stranger.threads.get(thread_id), 404)
    await refused(stranger.threads.get_state(thread_id), 404)
    await refused(stranger.runs.wait(thread_id, REFUND, command={"resume": "approve"}), 404)
    await refused(stranger.runs.get(thread_id, run_id), 404)
    await refused(stranger.threads.search(limit=100), 404)
    assert (await client.threads.get(thread_id))["status"] == "interrupted"

    # high-value-refund: the requester may not approve; two other owners must.
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "high-value-refund", input=REFUND_INPUT)
    problem = await refused(
        client.runs.wait(thread_id, "high-value-refund", command={"resume": "approve"}), 403
    )
    assert problem["type"].endswith("/self-approval"), problem
    second = target.client(target.second_owner)
    accepted = await second.runs.create(
        thread_id, "high-value-refund", command={"resume": "approve"}
    )
    assert accepted["status"] == "pending"
    assert (await client.threads.get(thread_id))["status"] == "interrupted"


CHAT = "conversation"


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def last_reply(values: dict[str, Any]) -> str:
    replies = [m["content"] for m in values["messages"] if m.get("type") == "ai"]
    return str(replies[-1]) if replies else ""


async def conversation_flow(target: Target) -> list[str]:
    """A thread as a conversation: every turn sees the ones before; turn 3 waits for a review
    while a follow-up is queued behind it (``enqueue``, the default) and a ``reject`` is
    refused; a running turn is interrupted, and another rolled back; the thread's runs, history
    and metadata read as LangGraph's; a thread is deleted once its runs ended. Returns the
    deleted threads' ids, so a caller with the store at hand can see what went with them."""
    client = target.client()
    # A case of its own: other flows on the same server (the JS client's) search by metadata too.
    case = f"chat-{uuid.uuid4()}"
    thread_id = (await client.threads.create(metadata={"case": case}))["thread_id"]
    for number, text in enumerate(["hello", "my name is Ada"], start=1):
        out = await client.runs.wait(thread_id, CHAT, input=said(text))
        assert last_reply(out).startswith(f"turn {number}: you said {text!r}"), out
    waiting = await client.runs.wait(thread_id, CHAT, input=said("refund my order"))
    [interrupt] = waiting["__interrupt__"]
    assert (await client.threads.get(thread_id))["status"] == "interrupted"
    problem = await refused(
        client.runs.wait(thread_id, CHAT, input=said("hi?"), multitask_strategy="reject"), 409
    )
    assert problem["type"].endswith("/thread-busy"), problem
    queued = await client.runs.create(thread_id, CHAT, input=said("what is my name?"))
    assert queued["status"] == "pending" and queued["multitask_strategy"] == "enqueue"
    # The review is still the thread's, and the decision answers it, not the queued run.
    state = await client.threads.get_state(thread_id)
    assert [i["id"] for i in state["interrupts"]] == [interrupt["id"]]
    answered = await client.runs.wait(
        thread_id, CHAT, command={"resume": {interrupt["id"]: "approve"}}
    )
    assert "reviewer said approve" in last_reply(answered), answered
    fourth = await client.runs.join(thread_id, queued["run_id"])
    assert last_reply(fourth) == (
        "turn 4: you said 'what is my name?'; before: ['hello', 'my name is Ada',"
        " 'refund my order']"
    ), fourth

    # A running turn interrupted: cancelled before it stopped, so the new one starts from the
    # turn before it (its own input is gone with it), and its run reads as interrupted.
    slow = await client.runs.create(thread_id, CHAT, input=said("wait 20"))
    fifth = await client.runs.wait(
        thread_id, CHAT, input=said("stop that"), multitask_strategy="interrupt"
    )
    assert last_reply(fifth).startswith("turn 5: you said 'stop that'"), fifth
    assert "wait 20" not in last_reply(fifth)
    assert (await client.runs.get(thread_id, slow["run_id"]))["status"] == "interrupted"
    slow = await client.runs.create(thread_id, CHAT, input=said("wait 20 again"))
    sixth = await client.runs.wait(
        thread_id, CHAT, input=said("forget it"), multitask_strategy="rollback"
    )
    assert last_reply(sixth).startswith("turn 6: you said 'forget it'"), sixth

    runs = await client.runs.list(thread_id, limit=50)
    assert runs[0]["status"] == "success" and len(runs) >= 8, runs
    assert slow["run_id"] in [r["run_id"] for r in runs]
    history = await client.threads.get_history(thread_id, limit=3)
    assert [len(h["values"]["messages"]) for h in history][:1] == [12], history
    assert (await client.threads.get(thread_id))["status"] == "idle"
    await client.threads.update(thread_id, metadata={"topic": "billing"})
    found = await client.threads.search(metadata={"topic": "billing", "case": case}, limit=10)
    assert [t["thread_id"] for t in found] == [thread_id]
    assert found[0]["metadata"]["topic"] == "billing"

    # Time travel: the history is the branch the thread is on (the interrupted turn that left
    # no state and the rolled-back one are not on it); a run from its second checkpoint forks.
    history = await client.threads.get_history(thread_id, limit=20)
    assert [len(h["values"]["messages"]) for h in history] == [12, 10, 8, 6, 4, 2], history
    second = history[-2]["checkpoint"]["checkpoint_id"]
    branch = await client.runs.wait(thread_id, CHAT, input=said("branch"), checkpoint_id=second)
    assert last_reply(branch) == (
        "turn 3: you said 'branch'; before: ['hello', 'my name is Ada']"
    ), branch
    branched = await client.threads.get_history(thread_id, limit=20)
    assert [len(h["values"]["messages"]) for h in branched] == [6, 4, 2], branched
    # A person edits the state; the next turn sees the edit.
    note = {"messages": [{"role": "ai", "content": "a note from a person"}]}
    written = await client.threads.update_state(thread_id, note)
    assert written["checkpoint"]["checkpoint_id"], written
    state = await client.threads.get_state(thread_id)
    assert state["values"]["messages"][-1]["content"] == "a note from a person", state
    after_note = await client.runs.wait(thread_id, CHAT, input=said("seen the note?"))
    assert "a note from a person" in str(after_note["messages"]), after_note
    # A copy holds the state; runs on it leave the original alone.
    copy = await client.threads.copy(thread_id)
    assert copy is not None and copy["thread_id"] != thread_id
    copy_id = copy["thread_id"]
    on_copy = await client.runs.wait(copy_id, CHAT, input=said("on the copy"))
    assert "'seen the note?'" in last_reply(on_copy), on_copy
    assert "on the copy" not in str((await client.threads.get_state(thread_id))["values"])

    # Deleting: refused while a run is under way, then the thread is gone, and its id is not a
    # thread again; the copy, which started from it, lives on.
    slow = await client.runs.create(thread_id, CHAT, input=said("wait 20 before the end"))
    problem = await refused(client.threads.delete(thread_id), 409)
    assert problem["type"].endswith("/thread-busy"), problem
    await client.runs.cancel(thread_id, slow["run_id"], wait=True)
    await client.threads.delete(thread_id)
    for gone in (
        client.threads.get(thread_id),
        client.threads.get_state(thread_id),
        client.runs.list(thread_id),
        client.threads.delete(thread_id),
    ):
        problem = await refused(gone, 404)
        assert problem["type"].endswith("/thread-not-found"), problem
    problem = await refused(client.threads.create(thread_id=thread_id), 409)
    assert problem["type"].endswith("/thread-deleted"), problem
    found = await client.threads.search(metadata={"case": case}, limit=10)
    assert [t["thread_id"] for t in found] == [copy_id], found
    assert "'seen the note?'" in str((await client.threads.get_state(copy_id))["values"])
    return [thread_id]


MEMORY = "memory-notes"


async def memory_flow(target: Target) -> None:
    """LangGraph's cross-thread store: a fact one thread's run stores (before its review) is read
    by another thread's run and through ``client.store``; resuming the run does not store it
    again; what the client puts the graph reads; another workspace of the project and another
    project see none of it; LangGraph's namespace rules are a 400."""
    client = target.client()
    facts = ["facts"]
    first = (await client.threads.create())["thread_id"]
    asked = await client.runs.wait(
        first, MEMORY, input={"messages": [{"role": "user", "content": "remember code 4711"}]}
    )
    [interrupt] = asked["__interrupt__"]
    stored = await client.store.get_item(facts, "latest")
    assert stored["value"] == {"text": "code 4711"} and stored["namespace"] == facts, stored
    done = await client.runs.wait(
        first, MEMORY, command={"resume": {interrupt["id"]: {"decision": "approve"}}}
    )
    assert last_reply(done) == "noted 'code 4711'; reviewer said approve", done
    # The node ran again from its first line on resume; its put is a durable step, not redone.
    assert await client.store.get_item(facts, "latest") == stored

    second = (await client.threads.create())["thread_id"]
    recalled = await client.runs.wait(
        second, MEMORY, input={"messages": [{"role": "user", "content": "what do you know?"}]}
    )
    assert last_reply(recalled) == "I remember: code 4711", recalled
    found = await client.store.search_items(facts, filter={"text": "code 4711"})
    assert [(i["namespace"], i["key"]) for i in found["items"]] == [(facts, "latest")]
    assert (await client.store.search_items(facts, filter={"text": "other"}))["items"] == []
    assert (await client.store.list_namespaces(prefix=facts))["namespaces"] == [facts]

    await client.store.put_item(facts, "latest", {"text": "put by the client"})
    third = await client.runs.wait(
        None, MEMORY, input={"messages": [{"role": "user", "content": "and now?"}]}
    )
    assert last_reply(third) == "I remember: put by the client", third

    sibling_url = target.url.rsplit("/workspaces/", 1)[0] + "/workspaces/memory-elsewhere"
    sibling = get_client(url=sibling_url, api_key=target.owner, timeout=60)
    assert await sibling.store.get_item(facts, "latest") is None
    assert (await sibling.store.search_items([]))["items"] == []
    assert (await sibling.store.list_namespaces())["namespaces"] == []
    elsewhere = await sibling.runs.wait(
        None, MEMORY, input={"messages": [{"role": "user", "content": "what do you know?"}]}
    )
    assert last_reply(elsewhere) == "I remember nothing", elsewhere
    stranger = target.client(target.other_project)
    await refused(stranger.store.get_item(facts, "latest"), 404)
    await refused(stranger.store.put_item(facts, "latest", {"text": "overwritten"}), 404)

    problem = await refused(client.store.put_item(["langgraph", "x"], "k", {"v": 1}), 400)
    assert "reserved" in problem["detail"], problem
    problem = await refused(client.store.search_items(facts, filter={"n": {"$regex": "."}}), 400)
    assert "$regex" in problem["detail"], problem

    await client.store.delete_item(facts, "latest")
    assert await client.store.get_item(facts, "latest") is None
    forgot = await client.runs.wait(
        None, MEMORY, input={"messages": [{"role": "user", "content": "anything?"}]}
    )
    assert last_reply(forgot) == "I remember nothing", forgot


async def webhook_flow(target: Target) -> None:
    """LangGraph's ``webhook`` of a run: called once per run, signed, after the run stops at its
    interrupt and after the resumed run ends, with LangGraph's body (the run, its status and the
    thread's values); a run without one tells nobody. The target signs with the receiver's
    secret and lets webhooks reach loopback (``webhook_receiver.ENV``)."""
    client = target.client()
    async with webhook_receiver() as receiver:
        thread_id = (await client.threads.create())["thread_id"]
        first = await client.runs.create(
            thread_id, REFUND, input=REFUND_INPUT, webhook=receiver.url
        )
        [asked] = await receiver.wait_for(1)
        body = asked.json
        assert body["run_id"] == first["run_id"] and body["thread_id"] == thread_id, body
        assert body["assistant_id"] == REFUND and body["status"] == "success", body
        assert body["execution_status"] == "suspended" and body["interrupts"], body
        assert any("CLM-4821" in str(m) for m in body["values"]["messages"]), body
        assert "webhook_sent_at" in body and "error" not in body, body
        assert asked.signed(), asked.headers

        [interrupt] = (await client.threads.get_state(thread_id))["interrupts"]
        second = await client.runs.wait(
            thread_id,
            REFUND,
            command={"resume": {interrupt["id"]: {"decision": "approve"}}},
            webhook=receiver.url,
        )
        assert "__interrupt__" not in second, second
        _, ended = await receiver.wait_for(2)
        done = ended.json
        assert done["execution_status"] == "completed" and done["status"] == "success", done
        assert done["run_id"] != body["run_id"] and done["interrupts"] == [], done
        assert done["values"]["messages"] == second["messages"], done
        assert ended.signed() and ended.headers["webhook-id"] != asked.headers["webhook-id"]

        quiet = (await client.threads.create())["thread_id"]
        await client.runs.wait(quiet, REFUND, input=REFUND_INPUT)
        # Once each: the orchestrator tells the notifier again with later outcomes, and the
        # dispatcher polls every second; two polls later nothing more has come.
        await asyncio.sleep(2.5)
        assert len(receiver.received) == 2, [r.json for r in receiver.received]


async def cron_flow(target: Target) -> None:
    """LangGraph's crons: a cron every two seconds runs each tick once, on a thread of its own
    (found by the ``cron_id`` in its metadata), each run's webhook called once, signed; the
    cron is listed, counted and changed; once deleted, no tick fires."""
    client = target.client()
    async with webhook_receiver() as receiver:
        cron = await client.crons.create(
            CHAT,
            schedule="* * * * * */2",
            input=said("tick"),
            webhook=receiver.url,
            on_run_completed="keep",
            metadata={"flow": "cron"},
        )
        cron_id = cron["cron_id"]
        assert cron["thread_id"] is None and cron["enabled"], cron
        assert cron_id in [c["cron_id"] for c in await client.crons.search(assistant_id=CHAT)]
        assert await client.crons.count(assistant_id=CHAT) >= 1
        ended = await receiver.wait_for(2)
        updated = await client.crons.update(cron_id, metadata={"flow": "cron", "seen": 2})
        assert updated["metadata"] == {"flow": "cron", "seen": 2}, updated
        await client.crons.delete(cron_id)
        assert cron_id not in [c["cron_id"] for c in await client.crons.search(limit=100)]
        await asyncio.sleep(1)  # a tick fired just before the delete ends
        threads = await client.threads.search(metadata={"cron_id": cron_id}, limit=100)
        ticks = [thread["metadata"]["cron_tick"] for thread in threads]
        assert len(ticks) == len(set(ticks)) >= 2, ticks
        for thread in threads:
            runs = await client.runs.list(thread["thread_id"])
            assert len(runs) == 1, runs
        bodies = [call.json for call in ended[:2]]
        assert all(call.signed() for call in ended), [call.headers for call in ended]
        assert len({body["run_id"] for body in bodies}) == 2, bodies
        assert {body["thread_id"] for body in bodies} <= {t["thread_id"] for t in threads}
        assert all(body["status"] == "success" for body in bodies), bodies
        await asyncio.sleep(5)  # two ticks and more: none fires
        after = await client.threads.search(metadata={"cron_id": cron_id}, limit=100)
        assert len(after) == len(threads), (ticks, after)


async def thread_cron_flow(target: Target) -> None:
    """``crons.create_for_thread``: every tick is the thread's next turn, seeing the turns
    before it (the conversation's own replies count them); the cron shows its thread; once it
    is deleted, the thread takes no more turns."""
    client = target.client()
    thread_id = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(thread_id, CHAT, input=said("hello"))
    assert last_reply(first).startswith("turn 1: you said 'hello'"), first
    cron = await client.crons.create_for_thread(
        thread_id, CHAT, schedule="* * * * * */2", input=said("tick")
    )
    assert cron["thread_id"] == thread_id and cron["enabled"], cron
    assert [c["cron_id"] for c in await client.crons.search(thread_id=thread_id)] == [
        cron["cron_id"]
    ]
    for _ in range(200):
        if len(await client.runs.list(thread_id, limit=100)) >= 3:
            break
        await asyncio.sleep(0.1)
    await client.crons.delete(cron["cron_id"])
    await asyncio.sleep(1)  # a tick fired just before the delete ends
    runs = await client.runs.list(thread_id, limit=100)
    assert len(runs) >= 3 and all(run["status"] == "success" for run in runs), runs
    replies = [
        message["content"]
        for message in (await client.threads.get_state(thread_id))["values"]["messages"]
        if message["type"] == "ai"
    ]
    ticks = [f"turn {n}: you said 'tick'" for n in range(2, len(runs) + 1)]
    assert [reply.split(";")[0] for reply in replies[1:]] == ticks, replies
    await asyncio.sleep(5)  # two ticks and more: none fires
    assert len(await client.runs.list(thread_id, limit=100)) == len(runs)
