"""The README's quickstart, run literally from a clean clone with only Python on the PATH.

The clone is of the committed HEAD (CI runs on a clean clone, so that is everything). The PATH
holds links to bash, make and Python and nothing else: no Java, Maven or Go can be found. The
README's blocks run in order, as a reader runs them: a block that is just ``make dev`` is the
first terminal (started, or stopped with Ctrl-C and started again); every other block is typed
into one shell session, the second terminal, so its variables carry from block to block. The
only departure from the README is the port: the test picks a free one (``INTERLOCK_PORT``, which
both ``make dev`` and the CLI honour).

The same clone then runs ``make up``, ``make down`` and ``make up`` again on the test's Kafka and
MongoDB: each ``down`` must leave the port free and no service running.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ports import free_port

# The first test carries the module's setup: a fresh clone's first ``make dev`` installs its
# virtualenv (up to 10 minutes by the fixture's own deadline) and every block may take up to
# 5; pytest-timeout's default of 120 s would cut that short on a loaded machine (it did on CI).
pytestmark = [pytest.mark.quickstart, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
ONLY_THESE_TOOLS = ("bash", "sh", "make", "env", "touch", "mkdir", "cat")
FORBIDDEN_TOOLS = ("java", "mvn", "go")
START_DEV = "make dev"


def quickstart_blocks() -> list[str]:
    """The README's shell blocks under "Quickstart", in order."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Quickstart", 1)[1].split("\n## ", 1)[0]
    section = section.split("The same with curl", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)]


@pytest.fixture(scope="module")
def python_only_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    bin_dir = tmp_path_factory.mktemp("bin")
    for tool in ONLY_THESE_TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed to follow the README"
        (bin_dir / tool).symlink_to(found)
    # The interpreter itself, not a pyenv shim (which needs pyenv) nor this test's virtualenv.
    base_python = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    (bin_dir / "python3").symlink_to(base_python)
    path = str(bin_dir)
    for tool in FORBIDDEN_TOOLS:
        assert shutil.which(tool, path=path) is None
    return path


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("quickstart") / "interlock"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True)
    return target


class FirstTerminal:
    """``make dev``, stopped as a user stops it: Ctrl-C."""

    def __init__(self, clone: Path, env: dict[str, str], log: Path) -> None:
        self.clone, self.env, self.log = clone, env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        seen = len(self.log.read_text(errors="replace")) if self.log.exists() else 0
        began = time.monotonic()
        self.process = subprocess.Popen(
            ["bash", "-c", START_DEV],
            cwd=self.clone,
            env=self.env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600  # the first start installs the virtualenv
        while "Interlock is running" not in self.log.read_text(errors="replace")[seen:]:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            assert time.monotonic() < deadline, "make dev did not start within 10 minutes"
            time.sleep(0.5)
        print(f"make dev was ready in {time.monotonic() - began:.0f}s")

    def stop(self) -> None:
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise AssertionError("make dev did not stop on Ctrl-C within 30 s") from None
        self.process = None


class SecondTerminal:
    """One bash session the README's command blocks are typed into, one after another."""

    def __init__(self, clone: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            ["bash", "--norc", "--noprofile"],
            cwd=clone,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.type("set -e")  # a command that fails ends the session, and so the test

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def type(self, commands: str, timeout: float = 300) -> str:
        """Run ``commands``; their output, once the session is back at its prompt."""
        assert self.process.stdin is not None
        marker = f"__block_done_{uuid.uuid4().hex}__"
        self.process.stdin.write(f"{commands}\necho {marker}\n")
        self.process.stdin.flush()
        output: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no end after {timeout}s:\n{''.join(output)}") from None
            if line is None:
                raise AssertionError(f"a command failed:\n{commands}\n---\n{''.join(output)}")
            if line.strip() == marker:
                return "".join(output)
            output.append(line)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def followed_quickstart(
    clone: Path, python_only_path: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[str], str]]:
    """Every block of the quickstart, run in order: the output of each command block, and the
    URL of the ``make dev`` still running at the end."""
    port = free_port()
    home = tmp_path_factory.mktemp("home")  # no profile of this machine's user can interfere
    env = {"PATH": python_only_path, "HOME": str(home), "INTERLOCK_PORT": str(port)}
    log = tmp_path_factory.mktemp("logs") / "make-dev.log"  # outside the clone: nothing left
    first, second = FirstTerminal(clone, env, log), SecondTerminal(clone, env)
    outputs: list[str] = []
    try:
        blocks = quickstart_blocks()
        assert blocks[0] == START_DEV
        for block in blocks:
            if block == START_DEV:
                first.stop()
                first.start()
                continue
            began = time.monotonic()
            outputs.append(second.type(block))
            print(f"block {len(outputs)} took {time.monotonic() - began:.1f}s:\n{outputs[-1]}")
        yield outputs, f"http://127.0.0.1:{port}"
    finally:
        second.close()
        first.stop()


def test_the_quickstart_approves_a_refund(followed_quickstart: tuple[list[str], str]) -> None:
    refund = followed_quickstart[0][0]
    assert "CLM-4821" in refund and "approve" in refund  # the pending review
    assert "completed" in refund and "Refunded $240" in refund


def test_two_other_owners_approve_a_high_value_refund(
    followed_quickstart: tuple[list[str], str],
) -> None:
    high_value = followed_quickstart[0][1]
    assert "refused, as it should be" in high_value  # the requester's own approval
    assert "completed" in high_value and "Refunded" in high_value, high_value


def test_the_email_before_a_review_is_sent_once_across_a_restart(
    followed_quickstart: tuple[list[str], str],
) -> None:
    outputs, url = followed_quickstart
    before_restart, after_restart = outputs[2], outputs[3]
    assert before_restart.count("Stage 1 of 1") == 1 and "Confirmed" not in before_restart
    assert after_restart.count("Stage 1 of 1") == 1 and after_restart.count("Confirmed") == 1
    assert "completed" in after_restart
    sink = httpx.get(f"{url}/dev/effects", timeout=30).json()
    assert [call["body"]["subject"] for call in sink["calls"]] == ["Stage 1 of 1", "Confirmed"]
    assert all(call["applied"] for call in sink["calls"])


def test_the_quickstart_leaves_no_file_behind(
    clone: Path, followed_quickstart: tuple[list[str], str]
) -> None:
    untracked = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout
    assert untracked == ""


def _descendants(pid: int) -> set[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    found = {int(child) for child in children.read_text().split()} if children.exists() else set()
    return found.union(*(_descendants(child) for child in found))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not collected it yet.
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"


@pytest.mark.integration
def test_make_up_then_down_then_up_again(
    clone: Path,
    followed_quickstart: tuple[list[str], str],  # it made the clone's virtualenv
    kafka_bootstrap: str,
    mongodb_uri: str,
) -> None:
    run = uuid.uuid4().hex[:8]
    port = free_port()
    env = {
        **os.environ,
        "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "INTERLOCK_MONGODB_URI": mongodb_uri,
        "INTERLOCK_TOPIC_PREFIX": f"up-{run}.",
        "INTERLOCK_CONSUMER_GROUP_PREFIX": f"up-{run}",
        "INTERLOCK_MONGODB_DATABASE": f"up_{run}",
        "INTERLOCK_TOPIC_PARTITIONS": "2",
        "INTERLOCK_PORT": str(port),
    }
    for _ in range(2):
        up = subprocess.run(
            ["make", "up"], cwd=clone, env=env, capture_output=True, text=True, timeout=300
        )
        assert up.returncode == 0 and "Interlock is running" in up.stdout, up.stdout + up.stderr
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
        supervisor = int((clone / ".infra" / "services.pid").read_text())
        services = _descendants(supervisor)
        assert len(services) == 4, f"interlock up ({supervisor}) runs {services}"

        down = subprocess.run(
            ["make", "down"], cwd=clone, env=env, capture_output=True, text=True, timeout=120
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert not [pid for pid in {supervisor, *services} if _alive(pid)]
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert not (clone / ".infra" / "services.pid").exists()
