"""Agent Inbox's protocol, pure: LangGraph's ``HumanInterrupt`` recognised as a review of its own,
its ``HumanResponse`` list checked against the ``config`` flags (every 400 reason), handed to the
graph exactly as sent, and judged like any other answer for separation of duties and quorums;
and the ``goto`` / ``update`` / ``end`` an answer may carry beside (or instead of) ``resume``."""

from __future__ import annotations

from typing import Any

import pytest

from services.sandbox.reviews import interrupt_reviews
from shared.agents import ReviewRules
from shared.domain.human_interrupt import requests_of
from shared.domain.judging import ReviewAnswer, answer_key, approving, check_may_decide
from shared.domain.principals import Reviewer, SeparationOfDuties, person
from shared.domain.review import ReviewError, described, resolve
from shared.events import InterruptReview, PendingInterrupt, ResumeCommand
from tests.factories import suspended

ID = "0123456789abcdef0123456789abcdef"
ARGS = {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}


def request(**allowed: bool) -> dict[str, Any]:
    flags = {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True}
    return {
        "action_request": {"action": "send_email", "args": dict(ARGS)},
        "config": {**flags, **allowed},
        "description": "Send it?",
    }


def review(value: Any = None) -> InterruptReview:
    (found,) = interrupt_reviews(
        [PendingInterrupt(interrupt_id=ID, value=value or [request()])], {}
    )
    return found


def answer(value: Any, target: InterruptReview | None = None) -> Any:
    resolution = resolve(
        [target or review()],
        decision=None,
        decisions=None,
        reviewer_notes=None,
        interrupt_id=None,
        tools={},
        resume=value,
    )
    return resolution


def test_a_human_interrupt_is_a_review_of_its_own_with_the_types_its_config_allows() -> None:
    found = review([request(allow_edit=False, allow_ignore=False)])
    assert found.kind == "human_interrupt"
    (action,) = found.actions
    assert (action.name, action.args, action.description) == ("send_email", ARGS, "Send it?")
    assert action.allowed_decisions == ["accept", "response"]
    # One request alone (not in a list) is the same review; anything else is not one.
    assert review(request()).kind == "human_interrupt"
    for other in ({"question": "?"}, [request(), {"x": 1}], [], {"action_request": {}}):
        assert requests_of(other) is None


@pytest.mark.parametrize(
    "value",
    [
        [{"type": "accept", "args": None}],
        [{"type": "accept", "args": {"action": "send_email", "args": ARGS}}],
        [{"type": "accept"}],
        [{"type": "edit", "args": {"action": "send_email", "args": {**ARGS, "to": "b@x.io"}}}],
        [{"type": "response", "args": "Not this week"}],
        [{"type": "ignore", "args": None}],
    ],
)
def test_each_response_agent_inbox_sends_is_returned_to_the_graph_exactly(value: Any) -> None:
    resolution = answer(value)
    assert resolution.values == {ID: value}
    assert resolution.summary == value[0]["type"]


def test_an_edit_is_recorded_with_the_args_before_and_after() -> None:
    edited = {**ARGS, "to": "b@x.io"}
    resolution = answer([{"type": "edit", "args": {"action": "send_email", "args": edited}}])
    assert resolution.edits == [
        {
            "position": 1,
            "before": {"name": "send_email", "args": ARGS},
            "after": {"name": "send_email", "args": edited},
        }
    ]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ([{"type": "edit", "args": {"action": "send_email", "args": ARGS}}], "allowed: accept"),
        ([{"type": "approve", "args": None}], "not a HumanResponse type"),
        ({"type": "accept", "args": None}, "a list of HumanResponse"),
        ([], "a list of HumanResponse"),
        ([{"type": "accept"}, {"type": "accept"}], "at most one per request"),
        ([{"type": "accept", "args": {"action": "send_email", "args": {}}}], "an edit"),
        ([{"type": "response", "args": "  "}], "the reviewer's text"),
        ([{"type": "ignore", "args": "why"}], "args null"),
        ([{"type": "accept", "args": None, "note": 1}], "unknown field"),
        (["accept"], '"type"'),
    ],
)
def test_a_response_that_does_not_fit_is_refused_saying_why(value: Any, said: str) -> None:
    target = review([request(allow_edit=False, allow_ignore=True)])
    with pytest.raises(ReviewError) as refused:
        answer(value, target)
    assert said in str(refused.value)


def test_a_type_not_allowed_names_the_types_that_are() -> None:
    target = review([request(allow_accept=False, allow_edit=False, allow_ignore=False)])
    with pytest.raises(ReviewError) as refused:
        answer([{"type": "accept", "args": None}], target)
    assert "'accept' is not allowed here; allowed: response" in str(refused.value)


def test_an_edit_changes_the_args_not_the_action() -> None:
    renamed = {"action": "wire_money", "args": ARGS}
    with pytest.raises(ReviewError) as refused:
        answer([{"type": "edit", "args": renamed}])
    assert "not the action" in str(refused.value)


def test_the_atlas_and_langchain_forms_are_pointed_to_the_human_response_list() -> None:
    with pytest.raises(ReviewError) as refused:
        resolve(
            [review()],
            decision="approve",
            decisions=None,
            reviewer_notes=None,
            interrupt_id=None,
            tools={},
        )
    assert "HumanResponse" in str(refused.value)


def test_ignore_is_a_rejection_and_every_other_response_approves() -> None:
    assert not approving(ReviewAnswer(resume=[{"type": "ignore", "args": None}]))
    for kind, args in (("accept", None), ("response", "no"), ("edit", {"action": "a"})):
        assert approving(ReviewAnswer(resume=[{"type": kind, "args": args}]))


def test_separation_of_duties_holds_for_agent_inbox_answers() -> None:
    """Where self-approval is off, the requester answers none of it; where approvals come from
    API keys only, a notification link may ignore or end a review (rejections), never accept
    it or send it elsewhere (a goto or an update changes what runs)."""
    requester = Reviewer.of_key("0000000000000001", "requester", "req@example.com")
    execution = suspended("exec-1").model_copy(
        update={"requested_by": requester.label, "requester_identity": requester.identity}
    )
    accept = ReviewAnswer(resume=[{"type": "accept", "args": None}])
    with pytest.raises(SeparationOfDuties):
        check_may_decide(requester, execution, ReviewRules(self_approval=False), accept)
    link = Reviewer.of_link("reviewers-email", person("ada@example.com"))
    keys_only = ReviewRules(link_approvals=False)
    check_may_decide(link, execution, keys_only, ReviewAnswer(resume=[{"type": "ignore"}]))
    check_may_decide(link, execution, keys_only, ReviewAnswer(command=ResumeCommand(end=True)))
    for given in (
        accept,
        ReviewAnswer(command=ResumeCommand(goto=["__end__"])),
        ReviewAnswer(command=ResumeCommand(update={"note": "x"})),
    ):
        with pytest.raises(SeparationOfDuties):
            check_may_decide(link, execution, keys_only, given)


# --- goto, update and end beside (or instead of) resume --------------------------------------


def resolve_with(command: ResumeCommand, resume: Any = None) -> Any:
    return resolve(
        [review()],
        decision=None,
        decisions=None,
        reviewer_notes=None,
        interrupt_id=None,
        tools={},
        resume=resume,
        command=command,
    )


def test_a_command_alone_answers_no_interrupt_and_says_what_it_asks() -> None:
    """Agent Chat UI's "mark as resolved" is ``Command(goto=END)`` alone: in LangGraph the
    interrupted node runs again (and interrupts again); nothing is resumed."""
    goto = ResumeCommand(goto=["__end__"])
    resolution = resolve_with(goto)
    assert resolution.values == {}
    assert resolution.summary == "goto __end__"
    assert described(resolution, goto) == "goto __end__"
    update = ResumeCommand(update=[("note", "x"), ("flag", 1)])
    assert resolve_with(update).summary == "update flag, note"
    assert resolve_with(ResumeCommand(end=True)).summary == "end (update_state as_node=__end__)"


def test_a_command_beside_resume_is_described_with_it() -> None:
    goto = ResumeCommand(goto=["notify"])
    resolution = resolve_with(goto, resume=[{"type": "accept", "args": None}])
    assert resolution.values == {ID: [{"type": "accept", "args": None}]}
    assert described(resolution, goto) == "accept; goto notify"


def test_end_takes_nothing_beside_it() -> None:
    with pytest.raises(ReviewError):
        resolve_with(ResumeCommand(end=True), resume=[{"type": "ignore", "args": None}])
    with pytest.raises(ValueError):
        ResumeCommand(end=True, goto=["x"])


def test_approvals_count_together_only_with_the_same_command() -> None:
    value = [{"type": "accept", "args": None}]
    plain = answer(value)
    keys = {
        answer_key(ReviewAnswer(resume=value), plain),
        answer_key(ReviewAnswer(resume=value, command=ResumeCommand(goto=["a"])), plain),
        answer_key(ReviewAnswer(resume=value, command=ResumeCommand(goto=["b"])), plain),
    }
    assert len(keys) == 3
