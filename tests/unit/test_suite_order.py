"""The suite's scheduling list names files that exist: a renamed file would silently lose its
early start (tests/conftest.py, ``LONGEST_FIRST``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

REPO = Path(__file__).resolve().parents[2]


def test_every_file_scheduled_first_exists() -> None:
    missing = [path for path in LONGEST_FIRST if not (REPO / path).is_file()]
    assert missing == []
