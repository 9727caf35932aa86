"""Which gateway and key the CLI uses, and how it says so: flag, environment, profile (the one
named, else the running instance's in this folder, else the user's), then the default on
INTERLOCK_PORT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.client.config import ConfigError, choose_profile, load_config
from interlock.profile import RunningInstance, RunningProfile


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of its own, with a user profile in ~/.config/interlock."""
    home = tmp_path / "home"
    user = home / ".config" / "interlock" / "profile.toml"
    user.parent.mkdir(parents=True)
    user.write_text('url = "http://user-profile:1"\napi_key = "user-key"\n')
    monkeypatch.setenv("HOME", str(home))
    return home


def running_here(folder: Path, pid: int) -> Path:
    profile = RunningProfile(
        RunningInstance("http://127.0.0.1:8765", pid, {"sqlite": "/x"}, api_key="dev-key"),
        folder / ".interlock" / "profile.toml",
    )
    profile.write()
    return profile.path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_flag_then_environment_then_profile_then_default(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    path = running_here(folder, os.getpid())
    env = {"INTERLOCK_PORT": "8100"}

    from_profile = load_config(env=env, cwd=folder)
    assert (from_profile.url, from_profile.api_key) == ("http://127.0.0.1:8765", "dev-key")
    assert from_profile.url_source == from_profile.key_source == f"the profile {path}"

    env |= {"INTERLOCK_URL": "http://env:2/", "INTERLOCK_API_KEY": "env-key"}
    from_env = load_config(env=env, cwd=folder)
    assert (from_env.url, from_env.api_key) == ("http://env:2", "env-key")
    assert (from_env.url_source, from_env.key_source) == ("INTERLOCK_URL", "INTERLOCK_API_KEY")

    flagged = load_config(url="http://flag:3", key="flag-key", env=env, cwd=folder)
    assert (flagged.url, flagged.api_key) == ("http://flag:3", "flag-key")
    assert (flagged.url_source, flagged.key_source) == ("--url", "--key")


def test_the_default_url_follows_interlock_port(tmp_path: Path) -> None:
    env = {"INTERLOCK_PROFILE": str(tmp_path / "none.toml"), "INTERLOCK_API_KEY": "k"}
    assert load_config(env=env).url == "http://127.0.0.1:8000"
    moved = load_config(env={**env, "INTERLOCK_PORT": "8100"})
    assert moved.url == "http://127.0.0.1:8100"
    assert moved.url_source == "the default with INTERLOCK_PORT=8100"
    # An empty variable is unset, as for every other setting.
    assert load_config(env={**env, "INTERLOCK_PORT": "", "INTERLOCK_URL": ""}).url.endswith(":8000")


def test_which_profile(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    user = home / ".config" / "interlock" / "profile.toml"
    assert choose_profile({}, folder).path == user

    running = running_here(folder, os.getpid())
    chosen = choose_profile({}, folder)
    assert (chosen.path, chosen.running) == (running, True)

    named = tmp_path / "named.toml"
    named.write_text('url = "http://named:4"\n')
    assert choose_profile({"INTERLOCK_PROFILE": str(named)}, folder).path == named


def test_a_profile_left_by_a_crash_is_ignored(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    running_here(folder, dead_pid())
    config = load_config(env={}, cwd=folder)
    assert (config.url, config.api_key) == ("http://user-profile:1", "user-key")


def test_verbose_says_where_each_came_from_but_not_the_key(tmp_path: Path) -> None:
    env = {"INTERLOCK_PROFILE": str(tmp_path / "none.toml"), "INTERLOCK_PORT": "8100"}
    line = load_config(key="secret-key", env=env).describe()
    assert line == (
        "interlock: gateway http://127.0.0.1:8100 (from the default with INTERLOCK_PORT=8100);"
        " key from --key; project demo, workspace default"
    )
    assert "secret-key" not in line


def test_no_key_anywhere_says_where_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(env={"INTERLOCK_PROFILE": str(tmp_path / "none.toml")}, cwd=tmp_path)
    message = str(raised.value)
    assert "--key" in message and "INTERLOCK_API_KEY" in message and "interlock dev" in message
