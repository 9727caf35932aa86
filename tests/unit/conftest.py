from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.inprocess import World, in_process_world


@pytest.fixture
async def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[World]:
    """The four services' handlers in one process, no I/O (see tests/unit/inprocess.py)."""
    async with in_process_world(tmp_path, monkeypatch) as built:
        yield built
