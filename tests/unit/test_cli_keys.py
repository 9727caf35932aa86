"""``interlock keys`` writes where the running Interlock reads: INTERLOCK_MONGODB_URI, else the
running-instance profile's store (the SQLite file of ``interlock dev``), else the default
MongoDB. A store that does not answer is one line and exit code 1 within the timeout."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from interlock.cli import app
from interlock.client.config import Profile
from interlock.key_store import MongoDefaults, MongoTarget, SqliteTarget, choose, redact
from interlock.profile import RunningInstance, RunningProfile, sqlite_store
from shared.store.sqlite import SqliteStore
from tests.ports import free_port

DEFAULTS = MongoDefaults("mongodb://default:27117/", "interlock", 1500)
UNSET = {"INTERLOCK_MONGODB_URI": None, "INTERLOCK_PROFILE": None}


def closed_port() -> int:
    """A local port nothing listens on."""
    return free_port()


def test_the_environment_then_the_profile_then_the_defaults() -> None:
    sqlite = Profile(Path("/w/p.toml"), {"store": {"sqlite": "/w/db.sqlite"}}, running=True)
    mongo = Profile(
        Path("/w/p.toml"),
        {"store": {"mongodb_uri": "mongodb://up:1/", "mongodb_database": "up_db"}},
        running=True,
    )
    empty = Profile(Path("/home/u/.config/interlock/profile.toml"), {}, running=False)

    assert choose({}, sqlite, DEFAULTS) == SqliteTarget(
        Path("/w/db.sqlite"), "the profile /w/p.toml"
    )
    assert choose({}, mongo, DEFAULTS) == MongoTarget(
        "mongodb://up:1/", "up_db", 1500, "the profile /w/p.toml"
    )
    assert choose({}, empty, DEFAULTS) == MongoTarget(
        "mongodb://default:27117/", "interlock", 1500, "the default settings"
    )
    given = {"INTERLOCK_MONGODB_URI": "mongodb://default:27117/"}
    assert choose(given, sqlite, DEFAULTS).source == "INTERLOCK_MONGODB_URI"


def test_passwords_are_not_printed() -> None:
    assert redact("mongodb://user:s3cret@db:1/?x=y") == "mongodb://user:***@db:1/?x=y"
    assert redact("mongodb://db:1/") == "mongodb://db:1/"


def test_an_unreachable_mongodb_is_one_line_within_the_timeout() -> None:
    env = {
        "INTERLOCK_MONGODB_URI": f"mongodb://127.0.0.1:{closed_port()}/",
        "INTERLOCK_MONGODB_TIMEOUT_MS": "1000",
    }
    for args in (
        ["keys", "list", "--project", "demo"],
        ["keys", "create", "--project", "demo", "--role", "PROJECT_OWNER"],
        ["keys", "revoke", "0123456789abcdef", "--project", "demo"],
    ):
        started = time.monotonic()
        result = CliRunner().invoke(app, args, env=env)
        elapsed = time.monotonic() - started
        assert result.exit_code == 1, result.output
        assert isinstance(result.exception, SystemExit)  # no exception escaped
        assert result.stdout == "" and "Traceback" not in result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("error: MongoDB mongodb://127.0.0.1:")
        assert "did not answer within 1 s" in lines[0] and "INTERLOCK_MONGODB_URI" in lines[0]
        assert elapsed < 2.5, elapsed


def test_keys_go_to_the_sqlite_store_of_the_instance_running_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "data" / "interlock.sqlite"
    database.parent.mkdir()
    asyncio.run(_create(database))
    RunningProfile(
        RunningInstance("http://127.0.0.1:1", os.getpid(), sqlite_store(database)),
        tmp_path / ".interlock" / "profile.toml",
    ).write()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    created = CliRunner().invoke(
        app,
        ["keys", "create", "--project", "demo", "--email", "second@example.com", "--verbose"],
        env=UNSET,
    )
    assert created.exit_code == 0, created.output
    assert f"keys in the SQLite store {database.resolve()}" in created.stderr
    key_id = created.stdout.split("key id:", 1)[1].split()[0]
    assert asyncio.run(_key_ids(database)) == [key_id]

    listed = CliRunner().invoke(app, ["keys", "list", "--project", "demo"], env=UNSET)
    assert key_id in listed.stdout and "second@example.com" in listed.stdout
    revoked = CliRunner().invoke(app, ["keys", "revoke", key_id, "--project", "demo"], env=UNSET)
    assert (revoked.exit_code, revoked.stdout) == (0, f"revoked {key_id}\n")
    unknown = CliRunner().invoke(app, ["keys", "revoke", "nope", "--project", "demo"], env=UNSET)
    assert unknown.exit_code == 1 and unknown.stderr == "error: no key nope in project demo\n"

    quiet = CliRunner().invoke(
        app, ["keys", "create", "--project", "demo", "--name", "bob", "--quiet"], env=UNSET
    )
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout.startswith("ilk_") and quiet.stdout.count("\n") == 1  # the secret alone


def test_a_missing_sqlite_store_is_an_error_not_a_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone" / "interlock.sqlite"
    profile = tmp_path / "named.toml"
    RunningProfile(RunningInstance("http://h:1", 1, sqlite_store(gone)), profile).write()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        app,
        ["keys", "list", "--project", "demo"],
        env={"INTERLOCK_MONGODB_URI": None, "INTERLOCK_PROFILE": str(profile)},
    )
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert "does not exist" in result.stderr and not gone.parent.exists()


async def _create(path: Path) -> None:
    store = await SqliteStore.open(path)
    await store.close()


async def _key_ids(path: Path) -> list[str]:
    store = await SqliteStore.open(path)
    try:
        return [key.key_id for key in await store.api_keys.list("demo")]
    finally:
        await store.close()
