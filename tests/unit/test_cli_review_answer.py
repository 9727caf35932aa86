"""The CLI's inline review of an interrupt that declares no decisions: the answer is sent as
LangGraph's resume value (JSON as the value it spells, other text as text), checked against the
interrupt's answer_schema before it is sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from interlock.client.review import ask_review

SCHEMA = {
    "type": "object",
    "properties": {"edited_text": {"type": "string", "minLength": 1}},
    "required": ["edited_text"],
}


def answered(monkeypatch: pytest.MonkeyPatch, *typed: str) -> list[str]:
    said: list[str] = []
    replies: Iterator[str] = iter(typed)

    def prompt(text: str, **_: Any) -> str:
        said.append(text)
        return next(replies)

    monkeypatch.setattr(typer, "prompt", prompt)
    monkeypatch.setattr(typer, "echo", lambda message="", **_: said.append(str(message)))
    return said


def suspended(review: dict[str, Any]) -> dict[str, Any]:
    return {
        "execution_id": "e-1",
        "agent": "edit-draft",
        "status": "suspended",
        "generation": 2,
        "suspend_context": {"draft": "hello"},
        "allowed_decisions": [],
        "reviews": [review],
    }


@pytest.mark.parametrize(
    ("typed", "value"),
    [("true", True), ("30", 30), ('{"a": [1]}', {"a": [1]}), ("Ada Lovelace", "Ada Lovelace")],
)
def test_a_free_answer_is_sent_as_the_value_it_spells(
    monkeypatch: pytest.MonkeyPatch, typed: str, value: Any
) -> None:
    answered(monkeypatch, typed, "")
    body = ask_review(suspended({"interrupt_id": "i", "kind": "decision"}))
    assert body == {"resume": value, "generation": 2}


def test_an_answer_that_does_not_fit_the_schema_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = answered(monkeypatch, '{"edited_text": ""}', "plain words", '{"edited_text": "ok"}', "")
    review = {"interrupt_id": "i", "kind": "decision", "answer_schema": SCHEMA}
    assert ask_review(suspended(review))["resume"] == {"edited_text": "ok"}
    assert sum("Invalid answer" in line for line in said) == 2
