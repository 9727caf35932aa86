"""``interlock dev`` keeps its data to its owner (issue 31, finding 8): after a run that used
every file (an outreach execution: the store, the checkpoints, the bus, the effects sink), the
data folder is 0700 and each file in it 0600; a folder an older version left 0755 with 0644 files
is taken down to that when it starts again."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.quickstart.test_dev_mode import Dev

pytestmark = pytest.mark.quickstart


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = Dev(tmp_path / "data")
    try:
        yield running
    finally:
        running.stop()


def modes(folder: Path) -> dict[str, int]:
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}


def test_the_data_folder_is_private_and_tightened_on_start(dev: Dev) -> None:
    dev.start()
    execution_id = dev.invoke("outreach", "Reach out to the prospect")
    dev.wait_for(execution_id, "suspended")
    files = modes(dev.data)
    for name in ("interlock.sqlite", "checkpoints.sqlite", "bus.sqlite", "effects.sqlite"):
        assert name in files, files
    assert stat.S_IMODE(dev.data.stat().st_mode) == 0o700
    assert set(files.values()) == {0o600}, files
    dev.stop()

    dev.data.chmod(0o755)  # as an older version left it
    for name in modes(dev.data):
        (dev.data / name).chmod(0o644)
    dev.start()
    dev.approve(execution_id, "ok")
    dev.wait_for(execution_id, "completed")
    assert stat.S_IMODE(dev.data.stat().st_mode) == 0o700
    assert set(modes(dev.data).values()) == {0o600}, modes(dev.data)
