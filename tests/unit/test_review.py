"""Checking a reviewer's answer against what the suspension asks: pure, every 400 reason."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.review import DecisionNotInList, ReviewError, resolve, stricter
from shared.events import ActionDecision, ActionReview, EditedAction, InterruptReview, ToolRule

EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
    "required": ["to", "subject"],
}
TOOLS = {
    "send_email": ToolRule(
        allowed_decisions=["approve", "edit", "reject"], args_schema=EMAIL_SCHEMA
    ),
    "execute_sql": ToolRule(
        allowed_decisions=["approve", "reject"], args_schema={"type": "object"}
    ),
    "read_data": ToolRule(allowed_decisions=None, args_schema={"type": "object"}),
    "ask_user": ToolRule(allowed_decisions=["respond"]),
}


def email(to: str = "a@example.com") -> ActionReview:
    return ActionReview(
        name="send_email",
        args={"to": to, "subject": "hi"},
        allowed_decisions=["approve", "edit", "reject"],
        args_schema=EMAIL_SCHEMA,
    )


def actions(
    *items: ActionReview, mode: str = "batched", interrupt_id: str = "i-1"
) -> InterruptReview:
    return InterruptReview(
        interrupt_id=interrupt_id, kind="actions", mode=mode, actions=list(items)
    )  # type: ignore[arg-type]


def decide(reviews: list[InterruptReview], **answer: Any) -> Any:
    answer.setdefault("decision", None)
    answer.setdefault("decisions", None)
    answer.setdefault("reviewer_notes", None)
    answer.setdefault("interrupt_id", None)
    return resolve(reviews, tools=TOOLS, **answer)


def test_atlas_word_for_an_agent_interrupt() -> None:
    review = InterruptReview(
        interrupt_id="i", kind="decision", allowed_decisions=["approve", "reject"]
    )
    resolution = decide([review], decision="Approve", reviewer_notes="ok")
    assert resolution.values == {"i": {"decision": "approve", "reviewer_notes": "ok"}}
    assert resolution.summary == "approve"
    with pytest.raises(DecisionNotInList, match="allowed decisions: approve, reject"):
        decide([review], decision="maybe")
    with pytest.raises(ReviewError, match="asks for one decision: send 'decision'"):
        decide([review], decisions=[ActionDecision(type="approve")])


def test_three_actions_answered_in_order_approve_edit_reject() -> None:
    pending = actions(email("a@x.com"), email("b@x.com"), email("c@x.com"))
    edited = EditedAction(name="send_email", args={"to": "ops@x.com", "subject": "hi"})
    resolution = decide(
        [pending],
        decisions=[
            ActionDecision(type="approve"),
            ActionDecision(type="edit", edited_action=edited),
            ActionDecision(type="reject", message="no"),
        ],
    )
    assert resolution.values == {
        "i-1": {
            "decisions": [
                {"type": "approve"},
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "send_email",
                        "args": {"to": "ops@x.com", "subject": "hi"},
                    },
                },
                {"type": "reject", "message": "no"},
            ]
        }
    }
    assert resolution.summary == "approve, edit, reject"
    assert resolution.edits == [
        {
            "position": 2,
            "before": {"name": "send_email", "args": {"to": "b@x.com", "subject": "hi"}},
            "after": {"name": "send_email", "args": {"to": "ops@x.com", "subject": "hi"}},
        }
    ]


def test_per_call_mode_resumes_with_the_single_decision() -> None:
    pending = [
        actions(email(), mode="per_call", interrupt_id="c1"),
        actions(email(), mode="per_call", interrupt_id="c2"),
    ]
    with pytest.raises(ReviewError, match=r"2 interrupts are pending .*'interrupt_id'"):
        decide(pending, decisions=[ActionDecision(type="approve")])
    resolution = decide(pending, decisions=[ActionDecision(type="approve")], interrupt_id="c2")
    assert resolution.values == {"c2": {"type": "approve"}}
    with pytest.raises(ReviewError, match="interrupt 'c9' is not pending; pending: c1, c2"):
        decide(pending, decisions=[ActionDecision(type="approve")], interrupt_id="c9")


def test_wrong_number_of_decisions_names_the_order() -> None:
    pending = actions(
        email(), ActionReview(name="execute_sql", args={}, allowed_decisions=["approve", "reject"])
    )
    with pytest.raises(
        ReviewError,
        match=r"2 action\(s\) are pending and 1 decision\(s\) were sent; "
        r".* send_email, execute_sql",
    ):
        decide([pending], decisions=[ActionDecision(type="approve")])


def test_a_type_the_action_does_not_allow() -> None:
    sql = ActionReview(
        name="execute_sql", args={"q": "drop"}, allowed_decisions=["approve", "reject"]
    )
    edit = ActionDecision(
        type="edit", edited_action=EditedAction(name="execute_sql", args={"q": "x"})
    )
    with pytest.raises(
        ReviewError,
        match=r"decision 1 \(edit\) for action execute_sql is not allowed; "
        r"allowed: approve, reject",
    ):
        decide([actions(sql)], decisions=[edit])


def test_edit_args_must_fit_the_tool_schema() -> None:
    bad = ActionDecision(
        type="edit", edited_action=EditedAction(name="send_email", args={"to": 5, "subject": "x"})
    )
    with pytest.raises(
        ReviewError, match="do not fit send_email's schema: to: 5 is not of type 'string'"
    ):
        decide([actions(email())], decisions=[bad])
    missing = ActionDecision(
        type="edit", edited_action=EditedAction(name="send_email", args={"to": "x"})
    )
    with pytest.raises(ReviewError, match="'subject' is a required property"):
        decide([actions(email())], decisions=[missing])
    with pytest.raises(ReviewError, match="needs 'edited_action'"):
        decide([actions(email())], decisions=[ActionDecision(type="edit")])


def test_an_edit_may_not_rename_the_call_to_a_stricter_or_unknown_tool() -> None:
    to_sql = ActionDecision(type="edit", edited_action=EditedAction(name="execute_sql", args={}))
    with pytest.raises(
        ReviewError, match="renames the call to execute_sql, whose policy is stricter"
    ):
        decide([actions(email())], decisions=[to_sql])
    to_nothing = ActionDecision(type="edit", edited_action=EditedAction(name="rm_rf", args={}))
    with pytest.raises(ReviewError, match="which is not a tool"):
        decide([actions(email())], decisions=[to_nothing])
    to_read = ActionDecision(
        type="edit", edited_action=EditedAction(name="read_data", args={"t": 1})
    )
    assert decide([actions(email())], decisions=[to_read]).summary == "edit"


def test_respond_needs_a_message() -> None:
    ask = ActionReview(name="ask_user", args={"question": "?"}, allowed_decisions=["respond"])
    with pytest.raises(
        ReviewError, match=r"decision 1 \(respond\) for action ask_user needs a 'message'"
    ):
        decide([actions(ask)], decisions=[ActionDecision(type="respond")])
    ok = decide([actions(ask)], decisions=[ActionDecision(type="respond", message="Tuesday")])
    assert ok.values == {"i-1": {"decisions": [{"type": "respond", "message": "Tuesday"}]}}


def test_the_atlas_word_answers_a_single_action() -> None:
    assert decide([actions(email())], decision="approve").values == {
        "i-1": {"decisions": [{"type": "approve"}]}
    }
    rejected = decide([actions(email())], decision="reject", reviewer_notes="spam")
    assert rejected.values == {"i-1": {"decisions": [{"type": "reject", "message": "spam"}]}}
    with pytest.raises(ReviewError, match=r"2 actions are pending .*send 'decisions'"):
        decide([actions(email(), email())], decision="approve")
    with pytest.raises(ReviewError, match="needs the list form"):
        decide([actions(email())], decision="edit")


def test_exactly_one_form() -> None:
    with pytest.raises(ReviewError, match="exactly one of 'decision'"):
        decide([actions(email())], decision="approve", decisions=[ActionDecision(type="approve")])


def test_stricter_rule() -> None:
    assert not stricter(None, ["approve", "edit", "reject"])
    assert not stricter(["approve", "edit", "reject"], ["approve", "edit", "reject"])
    assert stricter(["approve", "reject"], ["approve", "edit", "reject"])
    assert stricter(["respond"], ["approve", "edit"])


# --- LangGraph's form: ``resume``, the value interrupt() returns (issue 32) ---------------------

A = "0123456789abcdef0123456789abcdef"
B = "fedcba9876543210fedcba9876543210"


def free(interrupt_id: str = A, schema: dict[str, Any] | None = None) -> InterruptReview:
    """An interrupt that declares no decisions: it takes any value."""
    return InterruptReview(interrupt_id=interrupt_id, kind="decision", answer_schema=schema)


def declared(interrupt_id: str = A) -> InterruptReview:
    return InterruptReview(
        interrupt_id=interrupt_id, kind="decision", allowed_decisions=["approve", "reject"]
    )


@pytest.mark.parametrize(
    "value", [False, True, 30, 2.5, "reject", "", {"edited_text": "x"}, [1, "two"], [], {"a": {}}]
)
def test_a_free_interrupt_returns_exactly_the_value_sent(value: Any) -> None:
    resolution = decide([free()], resume=value, reviewer_notes="beside, never inside")
    assert resolution.values == {A: value}


def test_a_free_answer_is_summed_up_in_one_line_for_the_record() -> None:
    assert decide([free()], resume=False).summary == "false"
    assert decide([free()], resume="  ship it ").summary == "ship it"
    long = decide([free()], resume={"text": "x" * 200}).summary
    assert len(long) == 80 and long.endswith("…")


def test_null_is_no_answer() -> None:
    with pytest.raises(ReviewError, match="null is no answer"):
        decide([free()], resume={A: None})


def test_an_interrupt_that_declares_decisions_takes_one_of_them_as_a_word_or_a_body() -> None:
    assert decide([declared()], resume="Reject", reviewer_notes="n").values == {
        A: {"decision": "reject", "reviewer_notes": "n"}
    }
    body = {"decision": "approve", "reviewer_notes": "fine"}
    assert decide([declared()], resume=body).values == {A: body}
    with pytest.raises(DecisionNotInList):
        decide([declared()], resume="maybe")
    for wrong in (True, 3, {"decision": "approve", "extra": 1}, ["approve"]):
        with pytest.raises(ReviewError, match="declares its decisions"):
            decide([declared()], resume=wrong)


def test_an_answer_schema_is_checked_before_anything_is_stored() -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
    assert decide([free(schema=schema)], resume={"age": 30}).values == {A: {"age": 30}}
    with pytest.raises(ReviewError, match="answer_schema: age: 'thirty' is not of type"):
        decide([free(schema=schema)], resume={"age": "thirty"})
    with pytest.raises(ReviewError, match="not a JSON schema"):
        decide([free(schema={"type": "no-such-type"})], resume=1)


def test_tool_calls_take_langchains_decisions_in_any_of_its_forms() -> None:
    review = actions(email(), interrupt_id=A)
    expected = {A: {"decisions": [{"type": "approve"}]}}
    assert decide([review], resume={"decisions": [{"type": "approve"}]}).values == expected
    assert decide([review], resume=[{"type": "approve"}]).values == expected
    assert decide([review], resume={"type": "approve"}).values == expected
    with pytest.raises(ReviewError, match="reviews 1 tool call"):
        decide([review], resume="approve")
    with pytest.raises(ReviewError, match="is not allowed"):
        decide([review], resume={"decisions": [{"type": "respond", "message": "m"}]})


def test_a_map_keyed_by_interrupt_ids_answers_several_at_once() -> None:
    resolution = decide([free(A), declared(B)], resume={A: {"topic": "cats"}, B: "approve"})
    assert resolution.values == {
        A: {"topic": "cats"},
        B: {"decision": "approve", "reviewer_notes": None},
    }
    assert resolution.summary == '{"topic": "cats"}; approve'


def test_a_partial_map_answers_only_what_it_names() -> None:
    assert decide([free(A), free(B)], resume={B: 1}).values == {B: 1}


def test_a_map_naming_an_interrupt_that_is_not_pending_or_none_is_refused() -> None:
    with pytest.raises(ReviewError, match="is not pending"):
        decide([free(A)], resume={B: 1})
    # {} is an empty map to LangGraph too (every key of none is an id): not a value.
    with pytest.raises(ReviewError, match="names no interrupt"):
        decide([free(A)], resume={})
    with pytest.raises(ReviewError, match="leave out 'interrupt_id'"):
        decide([free(A)], resume={A: 1}, interrupt_id=A)


def test_an_unkeyed_value_with_several_pending_must_name_its_interrupt() -> None:
    with pytest.raises(ReviewError, match="name the one you answer"):
        decide([free(A), free(B)], resume="x")
    assert decide([free(A), free(B)], resume="x", interrupt_id=B).values == {B: "x"}


def test_resume_goes_alone() -> None:
    with pytest.raises(ReviewError, match="exactly one of"):
        decide([free()], resume=1, decision="approve")
