"""``interlock dev``'s data folder is its owner's only (issue 31, finding 8): executions, audit
trails, key hashes, checkpoints and the bus's messages were SQLite files of mode 0644 in a 0755
folder. The folder is made 0700 and every file in it 0600, journals included, whether the run
creates them or finds them left by an older version; whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.dev import DevSettings, embedded, private_data_dir
from shared.store.api_keys import Role, create_key
from shared.store.sqlite import SqliteStore
from shared.store.sqlite.database import make_private

DATA_FILES = ("interlock.sqlite", "checkpoints.sqlite", "bus.sqlite")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes_in(folder: Path) -> dict[str, int]:
    return {path.name: mode(path) for path in folder.iterdir()}


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask, so what is tested is the code's modes, not the umask's."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def settings_for(data_dir: Path) -> DevSettings:
    return DevSettings(data_dir=data_dir, kafka_bootstrap_servers="unused:9092")


async def use_every_file(data_dir: Path) -> None:
    """Open the embedded wiring and write to the store, so SQLite makes its WAL files too."""
    async with embedded(settings_for(data_dir)) as wiring:
        await wiring.store.ensure_indexes()
        await create_key(wiring.store.api_keys, project_id="demo", role=Role.OWNER, name="t")
        await wiring.bus.start()
        try:
            files = modes_in(data_dir)
            assert set(DATA_FILES) <= set(files), files
            assert "interlock.sqlite-wal" in files, files
            assert set(files.values()) == {0o600}, files
        finally:
            await wiring.bus.stop()


@pytest.mark.usefixtures("open_umask")
async def test_a_new_data_folder_is_0700_and_its_files_0600(tmp_path: Path) -> None:
    data_dir = tmp_path / ".interlock" / "dev"
    await use_every_file(data_dir)
    assert mode(data_dir) == 0o700
    assert mode(data_dir.parent) == 0o700  # created with it, so private too
    assert set(modes_in(data_dir).values()) == {0o600}


@pytest.mark.usefixtures("open_umask")
async def test_an_existing_folder_and_its_files_are_tightened_on_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "dev"
    await use_every_file(data_dir)
    # As an older version left them.
    data_dir.chmod(0o755)
    for name in modes_in(data_dir):
        (data_dir / name).chmod(0o644)
    (data_dir / "interlock.sqlite-shm").touch()
    (data_dir / "interlock.sqlite-shm").chmod(0o666)
    (data_dir / "effects.sqlite").write_bytes(b"")
    (data_dir / "effects.sqlite").chmod(0o644)
    parent_mode = mode(tmp_path)
    await use_every_file(data_dir)
    assert mode(data_dir) == 0o700
    assert set(modes_in(data_dir).values()) == {0o600}, modes_in(data_dir)
    assert mode(tmp_path) == parent_mode  # a folder it did not create is not its to change


@pytest.mark.usefixtures("open_umask")
async def test_the_sqlite_store_makes_its_file_private_wherever_it_is(tmp_path: Path) -> None:
    """``interlock keys`` opens the store outside ``interlock dev``: the file is private too."""
    path = tmp_path / "elsewhere.sqlite"
    store = await SqliteStore.open(path)
    try:
        await create_key(store.api_keys, project_id="demo", role=Role.OWNER, name="t")
        assert mode(path) == 0o600
        assert mode(Path(f"{path}-wal")) == 0o600  # SQLite copies the database file's mode
    finally:
        await store.close()
    path.chmod(0o644)  # as an older version made it (the WAL is gone once it closed)
    store = await SqliteStore.open(path)
    await store.close()
    assert mode(path) == 0o600


def test_make_private_leaves_memory_and_uri_paths_alone(tmp_path: Path) -> None:
    for name in (":memory:", "", f"file:{tmp_path}/x.sqlite?mode=memory"):
        make_private(name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("open_umask")
def test_private_data_dir_skips_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    outside.chmod(0o644)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "link").symlink_to(outside)
    private_data_dir(data_dir)
    assert mode(outside) == 0o644
