"""The README's quickstart, run literally from a clean clone with only Python on the PATH.

The clone is of the committed HEAD (CI runs on a clean clone, so that is everything). The PATH
holds links to bash, make and Python and nothing else: no Java, Maven or Go can be found. The
only departure from the README is the port: the test picks a free one and points the CLI at it
(``INTERLOCK_PORT`` for ``make dev``, ``INTERLOCK_URL`` for the commands).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import free_port

pytestmark = pytest.mark.quickstart

REPO = Path(__file__).resolve().parents[2]
ONLY_THESE_TOOLS = ("bash", "sh", "make", "env", "touch", "mkdir", "cat")
FORBIDDEN_TOOLS = ("java", "mvn", "go")


def quickstart_blocks() -> list[str]:
    """The README's shell blocks under "Quickstart", in order."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Quickstart", 1)[1].split("\n## ", 1)[0]
    section = section.split("The same with curl", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)


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


@pytest.fixture(scope="module")
def running_dev(clone: Path, python_only_path: str) -> Iterator[tuple[str, dict[str, str]]]:
    [start, _] = quickstart_blocks()
    assert start.strip() == "make dev"
    port = free_port()
    env = {
        "PATH": python_only_path,
        "HOME": os.environ.get("HOME", "/root"),
        "INTERLOCK_PORT": str(port),
    }
    log = (clone / "make-dev.log").open("wb")
    began = time.monotonic()
    process = subprocess.Popen(
        ["bash", "-c", start],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600
        while "Interlock is running" not in (clone / "make-dev.log").read_text(errors="replace"):
            assert process.poll() is None, (clone / "make-dev.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "make dev did not start within 10 minutes"
            time.sleep(0.5)
        print(f"make dev from a clean clone was ready in {time.monotonic() - began:.0f}s")
        yield f"http://127.0.0.1:{port}", env
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_the_quickstart_approves_a_refund(
    clone: Path, running_dev: tuple[str, dict[str, str]]
) -> None:
    url, env = running_dev
    [_, commands] = quickstart_blocks()
    began = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-c", commands],
        cwd=clone,
        env={**env, "INTERLOCK_URL": url},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"the quickstart commands took {time.monotonic() - began:.1f}s")
    assert done.returncode == 0, done.stdout + done.stderr
    invoked = (clone / "invoked.json").read_text()
    assert '"status": "suspended"' in invoked and "CLM-4821" in invoked
    assert "CLM-4821" in done.stdout and "approve" in done.stdout  # the pending review
    assert "Execution resumed (decision approve)" in done.stdout
    assert "completed" in done.stdout and "Refunded $240" in done.stdout
