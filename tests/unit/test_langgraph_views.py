"""The LangGraph API's pure parts: ids, statuses, what a run answers, and how a client's input
and ``command.resume`` become Interlock's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from services.gateway.langgraph.requests import (
    RunRequest,
    agent_input,
    refuse_unsupported,
    review_answer,
    run_request,
)
from services.gateway.langgraph.views import epoch_of_run, result_of, segment_done
from services.gateway.problems import Problem
from shared.domain.execution import Execution, ExecutionStatus, Suspension
from shared.domain.runs import run_id, run_status, thread_of
from shared.domain.threads import turn_key
from shared.events import PendingInterrupt, ResumeCommand, SendTo
from tests.factories import pending


def at(
    status: ExecutionStatus, epoch: int, suspension: Suspension | None = None, **extra: Any
) -> Execution:
    return pending().model_copy(
        update={"status": status, "epoch": epoch, "suspension": suspension, **extra}
    )


def suspension(epoch: int, value: Any = "ok?", values: dict[str, Any] | None = None) -> Suspension:
    return Suspension(
        suspension_id=epoch,
        suspend_context={"value": value},
        allowed_decisions=["approve", "reject"],
        interrupt_ids=["i-1"],
        suspended_at=datetime.now(UTC),
        interrupts=[PendingInterrupt(interrupt_id="i-1", value=value)],
        values=values,
    )


def test_a_threads_execution_is_found_from_its_idempotency_key() -> None:
    execution = pending().model_copy(update={"idempotency_key": turn_key("t-1", 1)})
    assert thread_of(execution) == "t-1"
    assert thread_of(pending()) is None


def test_run_ids_are_one_per_epoch_and_found_again() -> None:
    execution = at(ExecutionStatus.SUSPENDED, 2, suspension(2))
    first, second, third = (run_id(execution.execution_id, e) for e in (1, 2, 3))
    assert len({first, second, third}) == 3
    assert epoch_of_run(execution, first, decided=False) == 1
    assert epoch_of_run(execution, second, decided=False) == 2
    # The next run exists once a decision was accepted for the suspension.
    assert epoch_of_run(execution, third, decided=False) is None
    assert epoch_of_run(execution, third, decided=True) == 3
    # The first run exists from the invoke on, before its dispatch.
    assert epoch_of_run(at(ExecutionStatus.PENDING, 0), first, decided=False) == 1


@pytest.mark.parametrize(
    ("status", "epoch", "run", "expected"),
    [
        (ExecutionStatus.PENDING, 0, 1, "pending"),
        (ExecutionStatus.RUNNING, 1, 1, "running"),
        (ExecutionStatus.SUSPENDED, 1, 1, "success"),
        (ExecutionStatus.SUSPENDED, 1, 2, "pending"),
        (ExecutionStatus.RESUMING, 2, 2, "running"),
        (ExecutionStatus.COMPLETED, 2, 1, "success"),
        (ExecutionStatus.COMPLETED, 2, 2, "success"),
        (ExecutionStatus.ERROR, 2, 2, "error"),
        # A cancel moves the epoch on: the run it ended is the one before.
        (ExecutionStatus.CANCELLED, 2, 1, "interrupted"),
        (ExecutionStatus.CANCELLED, 3, 1, "success"),
    ],
)
def test_run_status(status: ExecutionStatus, epoch: int, run: int, expected: str) -> None:
    assert run_status(at(status, epoch), run) == expected


def test_a_run_is_done_at_a_later_suspension_or_the_end() -> None:
    assert not segment_done(at(ExecutionStatus.SUSPENDED, 1, suspension(1)), 2)
    assert segment_done(at(ExecutionStatus.SUSPENDED, 2, suspension(2)), 2)
    assert segment_done(at(ExecutionStatus.CANCELLED, 1), 2)
    assert not segment_done(at(ExecutionStatus.SUSPENDED, 2, suspension(2)), None)


def test_a_waiting_run_answers_its_state_and_the_raw_interrupt() -> None:
    execution = at(ExecutionStatus.SUSPENDED, 1, suspension(1, "ok?", {"messages": ["m"]}))
    assert result_of(execution) == {
        "messages": ["m"],
        "__interrupt__": [{"value": "ok?", "id": "i-1"}],
    }


def test_a_failed_run_answers_its_error_and_a_finished_one_its_result() -> None:
    failed = at(ExecutionStatus.ERROR, 1, error={"error_type": "Boom", "message": "it broke"})
    assert result_of(failed) == {"__error__": {"error": "Boom", "message": "it broke"}}
    done = at(ExecutionStatus.COMPLETED, 2, result={"messages": [], "decision": "approve"})
    assert result_of(done) == {"messages": [], "decision": "approve"}


def test_input_messages_in_every_form_the_client_sends() -> None:
    """Stored as LangChain serializes them: what the graph and the views get is LangGraph's."""
    given = agent_input(
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"type": "ai", "content": "b", "id": "m-2"},
                ["human", "c"],
                {"role": "user", "content": [{"type": "text", "text": "d"}]},
                "e",
            ]
        }
    )
    assert given.state is not None
    messages = given.state["messages"]
    assert isinstance(messages, list)
    shapes = [(m["type"], m["content"]) for m in messages]  # type: ignore[index,call-overload]
    assert shapes == [
        ("human", "a"),
        ("ai", "b"),
        ("human", "c"),
        ("human", [{"type": "text", "text": "d"}]),
        ("human", "e"),
    ]
    assert messages[1]["id"] == "m-2"  # type: ignore[index,call-overload]


def test_input_is_the_graphs_state_with_any_keys() -> None:
    """A graph whose state is not messages gets its keys, as ``graph.invoke({...})`` would."""
    given = agent_input({"topic": "cats", "count": 3})
    assert given.graph_input() == {"topic": "cats", "count": 3}


@pytest.mark.parametrize(
    ("value", "slug"),
    [
        ({}, "invalid-input"),
        ("hello", "invalid-input"),
        ({"messages": []}, "empty-messages"),
        ({"messages": [{"role": "user", "content": "  "}]}, "blank-message"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": " "}]}]},
            "blank-message",
        ),
        ({"messages": [{"role": "tool", "content": "x"}]}, "invalid-input"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "invalid-input"),
        ({"messages": [3]}, "invalid-input"),
    ],
)
def test_input_refusals_name_their_problem(value: Any, slug: str) -> None:
    with pytest.raises(Problem) as refused:
        agent_input(value)
    assert refused.value.problem_status == 400
    assert refused.value.problem_type == slug


@pytest.mark.parametrize(
    "value",
    [
        "approve",
        {"decision": "reject", "reviewer_notes": "no"},
        {"decisions": [{"type": "approve"}]},
        {"0123456789abcdef0123456789abcdef": "approve"},
        False,
        30,
        {"edited_text": "a better draft"},
        ["a", {"b": 1}],
    ],
)
def test_command_resume_is_the_value_sent_as_langgraph_passes_it(value: Any) -> None:
    """What each kind of interrupt accepts is judged later, against the pending interrupts
    (tests/unit/test_review.py); the route takes the value as it is."""
    answer = review_answer({"resume": value})
    assert answer.resume == value
    assert (answer.decision, answer.decisions, answer.interrupt_id) == (None, None, None)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ({"goto": "__end__"}, ResumeCommand(goto=["__end__"])),
        (
            {"goto": ["a", {"node": "b", "input": {"x": 1}}]},
            ResumeCommand(goto=["a", SendTo(node="b", input={"x": 1})]),
        ),
        ({"update": {"note": "x"}}, ResumeCommand(update={"note": "x"})),
        (
            {"update": [["note", "x"]], "goto": "a"},
            ResumeCommand(goto=["a"], update=[("note", "x")]),
        ),
        ({"resume": "approve"}, None),
    ],
)
def test_command_goto_and_update_go_with_the_answer(
    command: dict[str, Any], expected: ResumeCommand | None
) -> None:
    """LangGraph's ``Command(goto=..., update=...)``, with or without ``resume``, as the JS and
    Python clients send it (a name or a list; ``Send`` as ``{"node", "input"}``; an object or
    pairs)."""
    answer = review_answer(command)
    assert answer.command == expected
    assert answer.resume == command.get("resume")


@pytest.mark.parametrize(
    ("command", "slug"),
    [
        ({"goto": 3}, "invalid-request"),
        ({"goto": []}, "invalid-request"),
        ({"goto": None, "update": None}, "invalid-request"),
        ({"goto": {"input": 1}}, "invalid-request"),
        ({"update": "note"}, "invalid-request"),
        ({}, "invalid-request"),
        ({"resume": None}, "invalid-request"),
        ({"resume": "approve", "extra": 1}, "invalid-request"),
    ],
)
def test_resume_refusals(command: dict[str, Any], slug: str) -> None:
    with pytest.raises(Problem) as refused:
        review_answer(command)
    assert refused.value.problem_status == 400
    assert refused.value.problem_type == slug


def test_a_run_body_needs_an_input_or_a_command_and_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(Problem):
        run_request({"assistant_id": "a"})
    # useStream sends an empty input beside every command: no input, as LangGraph reads it.
    both = run_request({"assistant_id": "a", "input": {}, "command": {"resume": "x"}})
    assert both.input is None and both.command == {"resume": "x"}
    # A real input beside a command is refused (LangGraph would drop the input in silence).
    with pytest.raises(Problem):
        run_request({"assistant_id": "a", "input": {"topic": "x"}, "command": {"resume": "x"}})
    # A checkpoint and no input runs the turn after it again (Agent Chat UI's regenerate).
    again = run_request({"assistant_id": "a", "checkpoint": {"checkpoint_id": "epoch-1"}})
    assert again.input is None and again.fork_checkpoint() == "epoch-1"
    for option in (
        {"interrupt_before": ["n"]},
        {"config": {"recursion_limit": 3}},
    ):
        with pytest.raises(Problem) as refused:
            refuse_unsupported(RunRequest.model_validate({"assistant_id": "a", **option}))
        assert refused.value.problem_type == "unsupported-option"
    # A webhook is served (issue 36): the URL is judged when the run starts (webhook_urls).
    refuse_unsupported(RunRequest.model_validate({"assistant_id": "a", "webhook": "http://x"}))
    # What the client sends by default passes.
    refuse_unsupported(
        RunRequest.model_validate(
            {"assistant_id": "a", "config": {}, "multitask_strategy": "reject", "durability": "x"}
        )
    )
    # ...and so do useStream's defaults, honoured (services/gateway/langgraph/stream_routes.py).
    defaults = RunRequest.model_validate(
        {
            "assistant_id": "a",
            "stream_mode": ["values", "messages-tuple", "custom"],
            "stream_subgraphs": True,
            "on_disconnect": "cancel",
        }
    )
    refuse_unsupported(defaults)
    assert defaults.stream_options().modes == ("values", "messages-tuple", "custom")
    assert defaults.stream_options().subgraphs
    with pytest.raises(Problem) as unknown:
        RunRequest.model_validate({"assistant_id": "a", "stream_mode": ["tasks"]}).stream_options()
    assert "tasks" in str(unknown.value)


async def test_cancelling_a_run_needs_an_owner_as_the_cancel_route_does() -> None:
    from types import SimpleNamespace

    from services.gateway.langgraph.service import LangGraphService, Scope
    from shared.store.api_keys import ApiKey, Role

    member = ApiKey(key_id="k", project_id="p1", role=Role.MEMBER, name="m", secret_hash="h")
    service = LangGraphService(
        SimpleNamespace(), SimpleNamespace(), SimpleNamespace(), SimpleNamespace()
    )  # type: ignore[arg-type]
    with pytest.raises(Problem) as refused:
        await service.cancel(Scope("p1", "w1"), pending(), member)
    assert refused.value.problem_status == 403
    assert refused.value.problem_type == "forbidden-role"
