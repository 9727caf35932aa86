"""What a LangGraph user does with ``langgraph-sdk``, pointed at Interlock: the flows the
end-to-end tests run against the separate-process services and against ``interlock dev``.
Nothing here talks to Interlock but through the LangGraph client."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

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
