"""The CLI in the folder where ``interlock dev`` runs needs no settings: it finds the gateway and
the development key through the running-instance profile (``.interlock/profile.toml``), and
``interlock keys`` writes to the dev server's SQLite store, which the server reads at once."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.quickstart.test_dev_mode import API, KEY, Dev

pytestmark = pytest.mark.quickstart

CLI = (sys.executable, "-m", "interlock.cli")


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    """``interlock dev`` run from ``tmp_path`` (its profile lands in tmp_path/.interlock)."""
    running = Dev(tmp_path / "data")
    try:
        running.start()
        wait_for_profile(tmp_path / ".interlock" / "profile.toml")
        yield running
    finally:
        running.stop()


def wait_for_profile(path: Path) -> None:
    # Written just after the announcement the fixture waits for.
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path}"
        time.sleep(0.1)


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``interlock`` as a user types it in ``folder``: none of the INTERLOCK_* settings, and a
    home of its own (no ~/.config/interlock/profile.toml of this machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
    env["HOME"] = str(folder / "home")
    return subprocess.run(
        [*CLI, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_profile_names_the_server_the_key_and_the_store(dev: Dev, tmp_path: Path) -> None:
    path = tmp_path / ".interlock" / "profile.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    profile = tomllib.loads(path.read_text())
    assert profile["url"] == dev.url and profile["api_key"] == KEY
    assert (profile["project"], profile["workspace"]) == ("demo", "default")
    assert profile["store"] == {"sqlite": str((dev.data / "interlock.sqlite").resolve())}
    assert dev.process is not None and profile["pid"] == dev.process.pid

    dev.stop()
    assert not path.exists()  # a clean stop takes it away


def test_the_cli_reaches_the_dev_server_through_the_profile(dev: Dev, tmp_path: Path) -> None:
    listed = cli(tmp_path, "executions", "list", "--json", "--verbose")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"] == []
    assert f"gateway {dev.url} (from the profile {tmp_path / '.interlock' / 'profile.toml'})" in (
        listed.stderr
    )

    dev.stop()
    # Stopped: no profile, no key.
    after = cli(tmp_path, "reviews")
    assert after.returncode == 2 and after.stderr.startswith("error: no API key")


def test_keys_made_with_the_cli_work_at_once_against_the_dev_server(
    dev: Dev, tmp_path: Path
) -> None:
    created = cli(
        tmp_path,
        "keys",
        "create",
        "--project",
        "demo",
        "--role",
        "PROJECT_OWNER",
        "--email",
        "second@example.com",
    )
    assert created.returncode == 0, created.stderr
    fields = dict(line.split(":", 1) for line in created.stdout.splitlines() if ":" in line)
    key_id, secret = fields["key id"].strip(), fields["secret"].strip()

    headers = {"Authorization": f"Bearer {secret}"}
    executions = f"{dev.url}{API}/executions"
    answer = httpx.get(executions, params={"workspace_id": "default"}, headers=headers)
    assert answer.status_code == 200, answer.text

    # A second owner: the development key starts a refund, this one may approve it.
    started = dev.call(
        "POST",
        f"{API}/workspaces/default/invoke",
        json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
    )
    execution_id = started.json()["execution_id"]
    dev.wait_for(execution_id, "suspended")
    approved = cli(
        tmp_path, "executions", "resume", execution_id, "--decision", "approve", "--key", secret
    )
    assert approved.returncode == 0, approved.stderr
    dev.wait_for(execution_id, "completed")

    listed = cli(tmp_path, "keys", "list", "--project", "demo")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith(key_id))
    assert "active" in line and "second@example.com" in line

    revoked = cli(tmp_path, "keys", "revoke", key_id, "--project", "demo")
    assert (revoked.returncode, revoked.stdout) == (0, f"revoked {key_id}\n")
    refused = httpx.get(executions, params={"workspace_id": "default"}, headers=headers)
    assert refused.status_code == 401
