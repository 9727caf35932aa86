"""The create_agent examples under HumanInTheLoopMiddleware (langchain 1.5), in process.

Each test runs a compiled graph on an ``InMemorySaver`` until it pauses, checks the interrupt
values, resumes with the reviewer's decisions and reads the outcome from the ledger. The exact
shapes asserted here are the contract the gateway and the reviewer UI rely on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt
from pydantic import ValidationError

from agents import fake_model, outreach_email, sql_ops
from agents.ledger import read_all
from interlock.sdk import PolicyError, parse_policy
from interlock.sdk.runtime import StepRun, step_run
from services.sandbox.tools import make_tools_durable
from shared.agents import load_registry
from shared.store.memory import InMemoryStore

HIGH = ["approve", "edit", "reject"]
EDIT_NOTICE = "Note: a human reviewer replaced this tool call before it ran."


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("INTERLOCK_AGENT_LEDGER", str(path))
    monkeypatch.delenv(fake_model.CHAT_MODEL_ENV, raising=False)
    return path


def config(thread: str = "exec-1") -> Any:
    return {"configurable": {"thread_id": thread}}


async def start(graph: Any, text: str, thread: str = "exec-1") -> list[Interrupt]:
    await graph.ainvoke({"messages": [{"role": "user", "content": text}]}, config(thread))
    return await pending(graph, thread)


async def pending(graph: Any, thread: str = "exec-1") -> list[Interrupt]:
    return list((await graph.aget_state(config(thread))).interrupts)


async def resume(graph: Any, answer: Any, thread: str = "exec-1") -> list[Any]:
    result = await graph.ainvoke(Command(resume=answer), config(thread))
    return list(result["messages"])


def sent(ledger: Path) -> list[dict[str, Any]]:
    return [e for e in read_all(ledger) if e["kind"] == "email"]


def tool_messages(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def email(i: int, of: int, body: str = "Hello, may we tell you more?") -> dict[str, Any]:
    return {
        "to": f"prospect{i}@example.com",
        "subject": f"Interlock intro ({i}/{of})",
        "body": body,
    }


def email_description(args: dict[str, Any]) -> str:
    return f"Send an email to {args['to']}\nSubject: {args['subject']}\n\n{args['body']}"


def edit(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


# --- outreach-email: batched -----------------------------------------------------------------


async def test_batched_interrupt_value_and_approve(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    [paused] = await start(graph, "send an email to a prospect")
    assert paused.value == {
        "action_requests": [
            {
                "name": "send_email",
                "args": email(1, 1),
                "description": email_description(email(1, 1)),
            }
        ],
        "review_configs": [{"action_name": "send_email", "allowed_decisions": HIGH}],
    }
    assert paused.response_schema is None  # batched: no schema, the gateway must validate
    assert sent(ledger) == []

    messages = await resume(graph, {"decisions": [{"type": "approve"}]})
    assert sent(ledger) == [{"kind": "email", "execution_id": "exec-1", **email(1, 1)}]
    assert await pending(graph) == []
    assert messages[-1].content == "Done. Sent 'Interlock intro (1/1)' to prospect1@example.com."


async def test_batched_edit_sends_to_the_edited_recipient(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    [paused] = await start(graph, "send 1 email")
    edited = {**email(1, 1), "to": "buyer@example.org"}
    # Keyed by interrupt id, as the sandbox resumes; {"decisions": [...]} alone works too.
    messages = await resume(graph, {paused.id: {"decisions": [edit("send_email", **edited)]}})
    assert [(e["to"], e["subject"]) for e in sent(ledger)] == [
        ("buyer@example.org", "Interlock intro (1/1)")
    ]
    result = tool_messages(messages)["call_0_0"]
    assert result.status == "success"
    assert str(result.content).startswith(EDIT_NOTICE)
    assert "Sent 'Interlock intro (1/1)' to buyer@example.org." in str(result.content)
    # The model's own call stays in its message; the edited one is what ran.
    ai = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    assert ai.tool_calls[0]["args"]["to"] == "prospect1@example.com"


async def test_batched_reject_does_not_send_and_explains(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    await start(graph, "send 1 email")
    messages = await resume(graph, {"decisions": [{"type": "reject", "message": "Too pushy."}]})
    assert sent(ledger) == []
    result = tool_messages(messages)["call_0_0"]
    assert result.status == "error"
    assert result.content == "User rejected the tool call for `send_email` with reason: Too pushy."


async def test_three_calls_answered_approve_edit_reject_in_order(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    [paused] = await start(graph, "send 3 emails")
    assert [a["args"] for a in paused.value["action_requests"]] == [email(i, 3) for i in (1, 2, 3)]
    assert [c["allowed_decisions"] for c in paused.value["review_configs"]] == [HIGH] * 3

    decisions = [
        {"type": "approve"},
        edit("send_email", **{**email(2, 3), "to": "cto@example.org"}),
        {"type": "reject", "message": "Not this one."},
    ]
    messages = await resume(graph, {"decisions": decisions})
    # The approved calls run as parallel tasks: their order in the ledger is not fixed.
    assert sorted(e["to"] for e in sent(ledger)) == ["cto@example.org", "prospect1@example.com"]
    results = tool_messages(messages)
    assert [results[f"call_0_{i}"].status for i in range(3)] == ["success", "success", "error"]
    assert str(results["call_0_1"].content).startswith(EDIT_NOTICE)


async def test_respond_answers_ask_user_without_running_it(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    [paused] = await start(graph, "ask the user what to pitch")
    question = {"question": outreach_email.QUESTION}
    assert paused.value == {
        "action_requests": [
            {
                "name": "ask_user",
                "args": question,
                "description": f"The agent asks: {outreach_email.QUESTION}\n"
                "Answer with a respond decision; the tool itself does not run.",
            }
        ],
        "review_configs": [{"action_name": "ask_user", "allowed_decisions": ["respond"]}],
    }
    # ask_user raises if it runs: the run completing proves respond bypassed it.
    messages = await resume(graph, {"decisions": [{"type": "respond", "message": "Blue."}]})
    answer = tool_messages(messages)["call_0_0"]
    assert (answer.status, answer.content) == ("success", "Blue.")
    assert messages[-1].content == "Done. Blue."
    assert read_all(ledger) == []


async def test_the_answer_feeds_the_next_turn_which_pauses_again(ledger: Path) -> None:
    graph = outreach_email.build_graph(InMemorySaver())
    await start(graph, "ask the user, then send 1 email")
    await resume(graph, {"decisions": [{"type": "respond", "message": "Blue."}]})
    [second] = await pending(graph)
    body = "Hello, may we tell you more about Blue?"
    assert second.value["action_requests"][0]["args"] == email(1, 1, body)
    await resume(graph, {"decisions": [{"type": "approve"}]})
    assert [e["body"] for e in sent(ledger)] == [body]
    assert await pending(graph) == []


async def test_a_bad_batched_answer_is_saved_and_replayed_so_validate_before_resuming(
    ledger: Path,
) -> None:
    """LangGraph stores the resume value before the middleware checks it: a wrong count or a
    disallowed decision raises ValueError on this and on every later resume of the thread."""
    graph = sql_ops.build_graph(InMemorySaver())
    await start(graph, "clean up old orders")
    with pytest.raises(ValueError, match="Decision type 'edit' is not allowed"):
        await resume(graph, {"decisions": [edit("execute_sql", query="DROP TABLE orders")]})
    assert len(await pending(graph)) == 1  # still listed as pending...
    with pytest.raises(ValueError, match="Decision type 'edit' is not allowed"):
        await resume(graph, {"decisions": [{"type": "approve"}]})  # ...but the bad answer wins
    assert read_all(ledger) == []

    other = outreach_email.build_graph(InMemorySaver())
    await start(other, "send 3 emails", thread="exec-2")
    with pytest.raises(ValueError, match=r"Number of human decisions \(1\) does not match"):
        await resume(other, {"decisions": [{"type": "approve"}]}, thread="exec-2")
    assert sent(ledger) == []


async def test_batched_edit_may_rename_the_tool_so_the_gateway_applies_the_policy(
    ledger: Path,
) -> None:
    """langchain runs an edit that renames send_email to ask_user (which must never run); the
    policy's rename rule is what refuses it."""
    graph = outreach_email.build_graph(InMemorySaver())
    await start(graph, "send 1 email")
    with pytest.raises(outreach_email.AskUserRan):
        await resume(graph, {"decisions": [edit("ask_user", question="Spam?")]})
    policy = outreach_email.DEFAULT_POLICY
    assert not policy.allows_rename("send_email", "ask_user")
    with pytest.raises(PolicyError):
        policy.check_rename("send_email", "ask_user")


# --- outreach-email-per-call -----------------------------------------------------------------


async def test_per_call_interrupt_values_and_keyed_resume(ledger: Path) -> None:
    graph = outreach_email.build_graph_per_call(InMemorySaver())
    paused = await start(graph, "send 3 emails")
    assert [p.value for p in paused] == [
        {
            "type": "tool_approval",
            "tool_call_id": f"call_0_{i - 1}",
            "name": "send_email",
            "args": email(i, 3),
            "description": email_description(email(i, 3)),
        }
        for i in (1, 2, 3)
    ]
    assert len({p.id for p in paused}) == 3
    schema = paused[0].response_schema
    assert schema is not None
    assert schema["discriminator"]["propertyName"] == "type"
    assert sorted(schema["discriminator"]["mapping"]) == sorted(HIGH)
    assert schema["$defs"]["EditedAction"]["properties"]["name"] == {
        "const": "send_email",
        "title": "Name",
        "type": "string",
    }

    by_call = {p.value["tool_call_id"]: p.id for p in paused}
    messages = await resume(
        graph,
        {
            by_call["call_0_0"]: {"type": "approve"},
            by_call["call_0_1"]: edit("send_email", **{**email(2, 3), "to": "cto@example.org"}),
            by_call["call_0_2"]: {"type": "reject"},
        },
    )
    assert sorted(e["to"] for e in sent(ledger)) == ["cto@example.org", "prospect1@example.com"]
    results = tool_messages(messages)
    assert [results[f"call_0_{i}"].status for i in range(3)] == ["success", "success", "error"]
    assert str(results["call_0_1"].content).startswith(EDIT_NOTICE)
    assert results["call_0_2"].content == (
        "User rejected the tool call for `send_email` with id call_0_2. The tool was not"
        " executed. Do not retry this tool call unless the user explicitly requests it."
    )
    assert await pending(graph) == []


async def test_per_call_answers_one_at_a_time_and_an_invalid_answer_is_not_saved(
    ledger: Path,
) -> None:
    graph = outreach_email.build_graph_per_call(InMemorySaver())
    first, second = await start(graph, "send 2 emails")
    # The edit branch pins the tool name: no rename is possible in per_call mode.
    with pytest.raises(ValidationError):
        await resume(graph, {first.id: edit("ask_user", question="Spam?")})
    with pytest.raises(ValidationError):
        await resume(graph, {first.id: {"type": "respond", "message": "not allowed here"}})
    assert [p.id for p in await pending(graph)] == [first.id, second.id]

    await resume(graph, {first.id: {"type": "approve"}})
    assert [e["to"] for e in sent(ledger)] == ["prospect1@example.com"]
    assert [p.id for p in await pending(graph)] == [second.id]

    messages = await resume(graph, {second.id: {"type": "reject", "message": "Enough."}})
    assert len(sent(ledger)) == 1
    assert tool_messages(messages)["call_0_1"].status == "error"
    assert await pending(graph) == []


async def test_per_call_respond(ledger: Path) -> None:
    graph = outreach_email.build_graph_per_call(InMemorySaver())
    [paused] = await start(graph, "ask the user")
    assert paused.value["type"] == "tool_approval"
    assert paused.value["name"] == "ask_user"
    messages = await resume(graph, {paused.id: {"type": "respond", "message": "Green."}})
    assert tool_messages(messages)["call_0_0"].content == "Green."
    assert read_all(ledger) == []


# --- sql-ops ---------------------------------------------------------------------------------


async def test_sql_ops_reviews_execute_sql_and_not_read_data(ledger: Path) -> None:
    graph = sql_ops.build_graph(InMemorySaver())
    [paused] = await start(graph, "clean up old orders")
    query = {"query": sql_ops.DEFAULT_QUERY}
    prefix = "SQL statement pending approval"
    assert paused.value == {
        "action_requests": [
            {
                "name": "execute_sql",
                "args": query,
                "description": f"{prefix}\n\nTool: execute_sql\nArgs: {query}",
            }
        ],
        "review_configs": [
            {"action_name": "execute_sql", "allowed_decisions": ["approve", "reject"]}
        ],
    }
    # Batched: the whole turn waits for the review, the unreviewed read included.
    assert read_all(ledger) == []
    await resume(graph, {"decisions": [{"type": "approve"}]})
    # Both calls run as parallel tasks: their order in the ledger is not fixed.
    assert sorted((e["kind"], e.get("table") or e.get("query")) for e in read_all(ledger)) == [
        ("read", "orders"),
        ("sql", sql_ops.DEFAULT_QUERY),
    ]


async def test_sql_ops_reject_runs_only_the_read(ledger: Path) -> None:
    graph = sql_ops.build_graph(InMemorySaver())
    await start(graph, "clean up old orders")
    messages = await resume(graph, {"decisions": [{"type": "reject", "message": "Keep them."}]})
    assert [e["kind"] for e in read_all(ledger)] == ["read"]
    assert tool_messages(messages)["call_0_1"].status == "error"


async def test_sql_ops_reads_without_review(ledger: Path) -> None:
    graph = sql_ops.build_graph(InMemorySaver())
    assert await start(graph, "read customers") == []
    assert read_all(ledger) == [{"kind": "read", "execution_id": "exec-1", "table": "customers"}]


async def test_the_policy_passed_to_the_factory_wins(ledger: Path) -> None:
    # execute_sql at high allows edit; read_data unlisted: default deny reviews it at high.
    policy = parse_policy("sql-ops", {"execute_sql": "high"})
    graph = sql_ops.build_graph(InMemorySaver(), policy=policy)
    [paused] = await start(graph, "read orders sql: DELETE FROM orders")
    assert paused.value["review_configs"] == [
        {"action_name": "read_data", "allowed_decisions": HIGH},
        {"action_name": "execute_sql", "allowed_decisions": HIGH},
    ]
    decisions = [{"type": "approve"}, edit("execute_sql", query="DELETE FROM orders WHERE id = 1")]
    await resume(graph, {"decisions": decisions})
    assert [e.get("query") for e in read_all(ledger) if e["kind"] == "sql"] == [
        "DELETE FROM orders WHERE id = 1"
    ]


def test_a_policy_naming_a_missing_tool_fails_the_factory() -> None:
    with pytest.raises(PolicyError, match="names tool 'drop_table'"):
        sql_ops.build_graph(None, policy=parse_policy("sql-ops", {"drop_table": "high"}))


def test_the_registered_policies_equal_the_factory_defaults() -> None:
    registry = load_registry(Path(__file__).parents[2] / "agents" / "agents.toml")
    expected = {
        "outreach-email": outreach_email.DEFAULT_POLICY,
        "outreach-email-per-call": outreach_email.DEFAULT_POLICY_PER_CALL,
        "sql-ops": sql_ops.DEFAULT_POLICY,
    }
    for name, policy in expected.items():
        spec = registry.get(name)
        assert spec is not None
        assert spec.policy is not None
        assert spec.policy.tools == policy.tools
        assert spec.policy.tiers == policy.tiers
    refund = registry.get("refund-approval")
    assert refund is not None
    assert refund.policy is None


# --- the sandbox's durable tools around the middleware ----------------------------------------


@pytest.mark.parametrize("per_call", [False, True])
async def test_durable_tools_wrap_the_review_and_an_edited_send_runs_once(
    ledger: Path, per_call: bool
) -> None:
    build = outreach_email.build_graph_per_call if per_call else outreach_email.build_graph
    graph = build(InMemorySaver())
    assert make_tools_durable(graph) == 1
    store = InMemoryStore()
    edited = edit("send_email", **{**email(1, 1), "to": "buyer@example.org"})
    run = await StepRun.open(execution_id="exec-1", epoch=1, attempt=1, store=store.steps)
    with step_run(run):
        [paused] = await start(graph, "send 1 email")
        answer = {paused.id: edited} if per_call else {"decisions": [edited]}
        await resume(graph, answer)
    assert [e["to"] for e in sent(ledger)] == ["buyer@example.org"]
    # The send is a durable step keyed by its tool call id: a replay would not send again.
    assert {r.name for r in (await store.steps.load("exec-1")).values()} == {"tool:send_email"}


# --- the scripted model ----------------------------------------------------------------------


def test_the_scripted_model_answers_from_the_conversation_alone() -> None:
    model = fake_model.ScriptedChatModel(script=outreach_email.script)
    history = [HumanMessage("send 2 emails")]
    first, again = model.invoke(history), model.invoke(history)
    assert isinstance(first, AIMessage)
    assert isinstance(again, AIMessage)
    assert first.tool_calls == again.tool_calls
    assert [c["id"] for c in first.tool_calls] == ["call_0_0", "call_0_1"]
    done = model.invoke(
        [
            *history,
            first,
            ToolMessage("sent 1", tool_call_id="call_0_0"),
            ToolMessage("sent 2", tool_call_id="call_0_1"),
        ]
    )
    assert done.content == "Done. sent 1 | sent 2"
    assert model.bind_tools([outreach_email.send_email]) is model
