"""``interlock dev`` as a user runs it: one process, SQLite files, nothing else installed. A
suspended execution is approved after the process was stopped and started again, and an agent's
emails reach the effects sink dev mode hosts once each, across a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ports import free_port

pytestmark = pytest.mark.quickstart

REPO = Path(__file__).resolve().parents[2]
KEY = "ilk_00000000000000de_development-key-not-for-production-use-000"
API = "/api/v1/projects/demo"
DEV_COMMAND = (sys.executable, "-m", "interlock.cli", "dev")


FLOWS_RATE = {"INTERLOCK_RATE_LIMIT_PER_SECOND": "1000", "INTERLOCK_RATE_LIMIT_BURST": "2000"}
"""For the client flows run back to back on one key, faster than a person (as the e2e cluster
allows)."""


class Dev:
    def __init__(
        self, data: Path, extra_args: tuple[str, ...] = (), extra_env: dict[str, str] | None = None
    ) -> None:
        self.data = data
        self.extra_args = extra_args
        self.extra_env = extra_env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data.parent / "dev.log"

    def start(self) -> None:
        env = {
            **os.environ,
            "INTERLOCK_LOG_FORMAT": "json",
            # Run from a folder of its own (as a user's checkout would be), not from this repo.
            "INTERLOCK_AGENTS_FILE": str(REPO / "agents" / "agents.toml"),
        }
        self.log.touch()
        for name in (
            "INTERLOCK_KAFKA_BOOTSTRAP_SERVERS",
            "INTERLOCK_MONGODB_URI",
            "INTERLOCK_EFFECTS_URL",
        ):
            env.pop(name, None)  # embedded: it must not need them
        env.update(self.extra_env)
        self.process = subprocess.Popen(
            [*DEV_COMMAND, "--port", str(self.port), "--data", str(self.data), *self.extra_args],
            cwd=self.data.parent,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        seen = len(self.log.read_text(errors="replace")) if self.log.exists() else 0
        deadline = time.monotonic() + 60
        while "Interlock is running" not in self.log.read_text(errors="replace")[seen:]:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            assert time.monotonic() < deadline, "interlock dev did not start"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            assert self.process.wait(timeout=30) == 0, self.log.read_text(errors="replace")
        self.process = None

    def invoke(self, agent: str, message: str) -> str:
        invoked = self.call(
            "POST",
            f"{API}/workspaces/default/invoke",
            json={"agent": agent, "message": message},
        )
        assert invoked.status_code == 202, invoked.text
        return str(invoked.json()["execution_id"])

    def approve(self, execution_id: str, notes: str) -> None:
        resumed = self.call(
            "POST",
            f"{API}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={"decision": "approve", "reviewer_notes": notes},
        )
        assert resumed.status_code == 202, resumed.text

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {KEY}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kwargs)

    def wait_for(self, execution_id: str, status: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            body = self.call(
                "GET", f"{API}/executions/{execution_id}", params={"workspace_id": "default"}
            ).json()
            if body["status"] == status or time.monotonic() > deadline:
                assert body["status"] == status, body
                return dict(body)
            time.sleep(0.2)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = Dev(tmp_path / "data")
    try:
        yield running
    finally:
        running.stop()


def test_a_suspended_execution_is_approved_after_a_restart(dev: Dev) -> None:
    approve_a_refund_across_a_restart(dev)
    assert (dev.data / "interlock.sqlite").exists() and (dev.data / "checkpoints.sqlite").exists()


@pytest.mark.integration
def test_the_same_process_runs_on_kafka_and_mongodb(
    tmp_path: Path, kafka_bootstrap: str, mongodb_uri: str
) -> None:
    run = uuid.uuid4().hex[:8]
    dev = Dev(
        tmp_path / "data",
        extra_args=("--kafka", kafka_bootstrap, "--mongodb", mongodb_uri),
        extra_env={
            "INTERLOCK_TOPIC_PREFIX": f"dev-{run}.",
            "INTERLOCK_CONSUMER_GROUP_PREFIX": f"dev-{run}",
            "INTERLOCK_MONGODB_DATABASE": f"dev_{run}",
            "INTERLOCK_TOPIC_PARTITIONS": "2",
        },
    )
    try:
        approve_a_refund_across_a_restart(dev)
    finally:
        dev.stop()
    assert not (dev.data / "interlock.sqlite").exists()  # nothing went to SQLite


def approve_a_refund_across_a_restart(dev: Dev) -> None:
    dev.start()
    execution_id = dev.invoke("refund-approval", "Refund claim CLM-4821")
    suspended = dev.wait_for(execution_id, "suspended")
    assert suspended["suspend_context"]["claim_id"] == "CLM-4821"

    dev.stop()
    dev.start()
    dev.approve(execution_id, "after a restart")
    done = dev.wait_for(execution_id, "completed")
    assert done["result"]["outcome"] == "refunded"
    assert done["decisions"][0]["reviewer_notes"] == "after a restart"


def test_the_same_validation_as_the_distributed_mode(dev: Dev) -> None:
    dev.start()
    unknown = dev.call(
        "POST", f"{API}/workspaces/default/invoke", json={"agent": "nope", "message": "hi"}
    )
    assert unknown.status_code == 400  # like every refusal of what was sent (issue 21)
    assert unknown.headers["content-type"] == "application/problem+json"
    nested = dev.call(
        "POST",
        f"{API}/executions/whatever/resume",
        params={"workspace_id": "default"},
        json={"human_review": {"decision": "approve"}},
    )
    assert nested.status_code == 400 and nested.json()["type"].endswith("/nested-decision")
    anonymous = httpx.get(f"{dev.url}{API}/agents", params={"workspace_id": "default"})
    assert anonymous.status_code == 401
    assert dev.call("GET", "/reviews").status_code == 200


def test_outreach_emails_reach_the_effects_sink_once_each_across_a_restart(dev: Dev) -> None:
    """The README's replay demonstration: the email before each review is sent once, although
    LangGraph runs the interrupted node again from its first line on every resume."""
    dev.start()
    execution_id = dev.invoke("outreach", "Reach out in 2 stages")
    dev.wait_for(execution_id, "suspended")
    dev.stop()
    dev.start()
    dev.approve(execution_id, "stage 2 may go")
    suspended = dev.wait_for(execution_id, "suspended")
    assert suspended["suspend_context"]["stage"] == 2, suspended
    dev.approve(execution_id, "confirm it")
    done = dev.wait_for(execution_id, "completed")
    assert len(done["result"]["sent"]) == 3, done

    sink = httpx.get(f"{dev.url}/dev/effects", timeout=30)
    assert sink.status_code == 200, sink.text
    calls = sink.json()["calls"]
    subjects = [call["body"]["subject"] for call in calls]
    assert subjects == ["Stage 1 of 2", "Stage 2 of 2", "Confirmed"], calls
    assert all(call["applied"] for call in calls) and sink.json()["applied"] == 3
    assert len({call["key"] for call in calls}) == 3
    assert (dev.data / "effects.sqlite").exists()
