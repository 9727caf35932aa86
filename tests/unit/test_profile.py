"""The running-instance profile ``interlock dev`` and ``interlock up`` leave for the CLI."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from interlock.dev import DEV_API_KEY, DevSettings
from interlock.profile import (
    RunningInstance,
    RunningProfile,
    connectable_url,
    dev_instance,
    live_profile,
    process_alive,
    to_toml,
    up_instance,
)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_toml_reads_back() -> None:
    instance = RunningInstance(
        url="http://127.0.0.1:8100",
        pid=42,
        store={"mongodb_uri": 'mongodb://u:p"w\\@h:1/?x=\x7f', "mongodb_database": "Zoë 🙂"},
        api_key="ilk_x",
    )
    assert tomllib.loads(to_toml(instance)) == {
        "url": "http://127.0.0.1:8100",
        "api_key": "ilk_x",
        "project": "demo",
        "workspace": "default",
        "pid": 42,
        "store": {"mongodb_uri": 'mongodb://u:p"w\\@h:1/?x=\x7f', "mongodb_database": "Zoë 🙂"},
    }
    keyless = tomllib.loads(to_toml(RunningInstance("http://h:1", 1, {"sqlite": "/a"})))
    assert "api_key" not in keyless


def test_written_for_its_owner_only_and_removed_only_by_its_writer(tmp_path: Path) -> None:
    path = tmp_path / ".interlock" / "profile.toml"
    ours = RunningProfile(RunningInstance("http://h:1", os.getpid(), {"sqlite": "/a"}), path)
    ours.write()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tomllib.loads(path.read_text())["pid"] == os.getpid()
    assert list(path.parent.iterdir()) == [path]  # no temporary file left

    # Another instance started here since: its profile is not ours to remove.
    theirs = RunningProfile(RunningInstance("http://h:2", os.getpid() + 1, {"sqlite": "/b"}), path)
    theirs.write()
    ours.remove()
    assert path.exists()
    theirs.remove()
    assert not path.exists()
    theirs.remove()  # already gone: nothing to do


def test_an_unwritable_folder_is_a_warning_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    RunningProfile(RunningInstance("http://h:1", 1, {}), blocker / "profile.toml").write()
    assert "warning: could not write" in capsys.readouterr().err


def test_a_profile_left_by_a_dead_process_is_not_live(tmp_path: Path) -> None:
    path = tmp_path / "profile.toml"
    RunningProfile(RunningInstance("http://h:1", os.getpid(), {}), path).write()
    assert live_profile(path) is not None
    RunningProfile(RunningInstance("http://h:1", dead_pid(), {}), path).write()
    assert live_profile(path) is None
    path.write_text("pid = [")
    assert live_profile(path) is None
    assert live_profile(tmp_path / "missing.toml") is None
    assert not process_alive("12") and not process_alive(0) and not process_alive(True)


def test_urls_a_client_can_connect_to() -> None:
    assert connectable_url("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert connectable_url("::", 8000) == "http://127.0.0.1:8000"
    assert connectable_url("::1", 8000) == "http://[::1]:8000"
    assert connectable_url("example.org", "9") == "http://example.org:9"


def test_dev_names_its_store_and_key(tmp_path: Path) -> None:
    embedded = DevSettings(
        data_dir=tmp_path / "data", port=8123, dev_api_key=DEV_API_KEY, environment="development"
    )
    instance = dev_instance(embedded)
    assert instance.url == "http://127.0.0.1:8123" and instance.api_key == DEV_API_KEY
    assert instance.store == {"sqlite": str((tmp_path / "data" / "interlock.sqlite").resolve())}
    assert instance.pid == os.getpid()

    on_mongodb = embedded.model_copy(
        update={"embedded": False, "mongodb_uri": "mongodb://m:1/", "mongodb_database": "d"}
    )
    assert dev_instance(on_mongodb).store == {
        "mongodb_uri": "mongodb://m:1/",
        "mongodb_database": "d",
    }


def test_up_names_the_services_database() -> None:
    defaults = up_instance("127.0.0.1", "8000", {})
    assert defaults.store == {
        "mongodb_uri": "mongodb://127.0.0.1:27117/",
        "mongodb_database": "interlock",
    }
    assert defaults.api_key is None
    given = up_instance(
        "0.0.0.0",
        "8100",
        {
            "INTERLOCK_MONGODB_URI": "mongodb://db:2/",
            "INTERLOCK_MONGODB_DATABASE": "prod_like",
            "INTERLOCK_DEV_API_KEY": "ilk_dev",
        },
    )
    assert (given.url, given.api_key) == ("http://127.0.0.1:8100", "ilk_dev")
    assert given.store == {"mongodb_uri": "mongodb://db:2/", "mongodb_database": "prod_like"}
    production = {"INTERLOCK_DEV_API_KEY": "ilk_dev", "INTERLOCK_ENVIRONMENT": "production"}
    assert up_instance("h", "1", production).api_key is None
