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
