"""Invisible characters in agent or user text are shown, never acted on by the terminal."""

from __future__ import annotations

import json

import pytest

from interlock.client.visible import json_text, visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("refund \u202e042$", "refund <U+202E>042$"),
        ("a\u2066b\u2069c", "a<U+2066>b<U+2069>c"),
        ("\u200e\u200f\u061c", "<U+200E><U+200F><U+061C>"),
        (
            "zero\u200bwidth\u200c\u200d\u2060\ufeff",
            "zero<U+200B>width<U+200C><U+200D><U+2060><U+FEFF>",
        ),
        ("nul\x00bell\x07esc\x1b[31m", "nul<U+0000>bell<U+0007>esc<U+001B>[31m"),
        ("cr\rdel\x7fc1\x85\x9b", "cr<U+000D>del<U+007F>c1<U+0085><U+009B>"),
    ],
)
def test_invisible_characters_are_written_as_code_points(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_lines_tabs_and_ordinary_text_stay_as_they_are() -> None:
    text = "Refund of 240 € for Zoë\n\tnext line — 日本語 عربى 🙂"
    assert visible(text) == text


def test_every_bidi_control_is_caught() -> None:
    controls = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]
    for code in controls:
        assert visible(chr(code)) == f"<U+{code:04X}>"


def test_json_stays_exact_and_shows_the_invisible_as_escapes() -> None:
    body = {"note": "approve \u202eevil\u202c", "nul": "a\x00b", "name": "Zoë 🙂", "n": [1, None]}
    text = json_text(body)
    assert json.loads(text) == body
    assert "\\u202e" in text and "\\u0000" in text and "Zoë 🙂" in text
    assert "\u202e" not in text and "\x00" not in text
