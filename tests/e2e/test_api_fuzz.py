"""Schemathesis against the served OpenAPI spec, with a valid owner key: no 5xx, and every
response conforms to the spec (status codes, content types, bodies). Its stateful phase chains
calls through the OpenAPI links, and must follow every link the invoke route declares. A second
run puts ``1e400``, ``-1e400`` and ``"\\ud800"`` in every body it generates
(``tests/e2e/hostile_json_hooks.py``) and asks for a 400 problem naming them on every route."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import REPO, Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE
from tests.e2e.test_security_edge import gateway_process

pytestmark = pytest.mark.e2e

CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    )
)
INVOKE = "/api/v1/projects/{project_id}/workspaces/{workspace_id}/invoke"
STREAM_SECONDS = "0.5"
"""The fuzzed gateway's stream lifetime. Schemathesis carries real scopes and ids into later
requests, so streams open for real (the workspace's changes, a suspended execution's events);
their keep-alive comments defeat its read timeout, and at the default 15 minutes they held the
run until the server was declared unavailable."""

# Random scopes and agents are refused before anything starts (403/404, unknown-agent), so the
# stateful phase would rarely get the 202 its links start from: the invoke is pinned to the
# key's project, a registered agent and a message (the other fields are still generated). The
# stateful phase gets more scenarios than the others, and no link calibration: that lowers the
# odds of following a link whose calls fail (most generated decisions are refused, most
# generated Last-Event-IDs too), and with it the run followed Resume or Stream as few as twice.
CONFIG = f"""
[generation]
max-examples = 40

[phases.stateful]
link-calibration = false

# Only the declared links: links schemathesis infers (from Location headers and parameter
# names) shared the stateful scenarios with the declared ones, and one full run followed
# X-Inferred-Link-7 and -9 instead of GetExecution and Resume.
[phases.stateful.inference]
algorithms = []

[phases.stateful.generation]
max-examples = 200

# The LangGraph API's routes are fuzzed in the other phases and left out of the stateful one:
# they shared its scenarios with the invoke's links, and the run followed none of GetAudit or
# Stream in 120 scenarios (200 now, so Resume is followed too). Their flows are tested end to
# end with langgraph-sdk (tests/e2e/test_langgraph_sdk.py).
[[operations]]
include-path-regex = "^/langgraph/"
phases.stateful.enabled = false

[[operations]]
include-name = "POST {INVOKE}"
parameters = {{ "path.project_id" = "{PROJECT}", "path.workspace_id" = "{WORKSPACE}", \
"body.agent" = "refund-approval", "body.message" = "Refund order 1042: it arrived broken" }}
"""


def declared_links(spec: dict[str, Any]) -> set[str]:
    """The invoke's links, named as schemathesis names the transitions it follows."""
    links = spec["paths"][INVOKE]["post"]["responses"]["202"]["links"]
    named = set()
    for name, link in links.items():
        escaped, _, method = link["operationRef"].removeprefix("#/paths/").rpartition("/")
        path = escaped.replace("~1", "/").replace("~0", "~")
        named.add(f"POST {INVOKE} -> [202] {name} -> {method.upper()} {path}")
    return named


def followed_links(events: Path) -> set[str]:
    """Transitions of the run whose parameters were filled from a response (NDJSON report)."""
    followed = set()
    for line in events.read_text().splitlines():
        finished = json.loads(line).get("ScenarioFinished")
        if finished is None:
            continue
        for case in finished["recorder"].get("cases", {}).values():
            transition = case.get("transition")
            if transition and case.get("is_transition_applied"):
                followed.add(transition["id"])
    return followed


@pytest.mark.timeout(600)
async def test_the_served_api_holds_to_its_spec(cluster: Cluster, tmp_path: Path) -> None:
    secret = await cluster.key(PROJECT)
    binary = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert binary is not None, "schemathesis is a dev dependency: pip install -e '.[dev]'"
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    events = tmp_path / "events.ndjson"
    async with gateway_process(
        cluster, "gateway-fuzz", INTERLOCK_STREAM_MAX_SECONDS=STREAM_SECONDS
    ) as gateway:
        process = await asyncio.create_subprocess_exec(
            binary,
            "--config-file",
            str(config),
            "run",
            f"{gateway.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {secret}",
            "--checks",
            CHECKS,
            "--seed",
            "20261130",
            "--request-timeout",
            "30",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(events),
            "--report-dir",
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=480)
        text = output.decode(errors="replace")
        assert process.returncode == 0, text[-6000:]
        async with httpx.AsyncClient() as client:
            spec = (await client.get(f"{gateway.url}/openapi.json")).json()
    declared = declared_links(spec)
    assert len(declared) == 5, declared
    missed = declared - followed_links(events)
    assert not missed, f"the stateful phase never followed {sorted(missed)}:\n{text[-3000:]}"


HOSTILE_CONFIG = """
[generation]
max-examples = 12
"""
"""The hostile run: only the fuzzing phase (its bodies come from the hooks' strategy), a few
examples per operation, each of them a hostile body."""


def failed_checks(events: Path) -> list[str]:
    """Each failed check's operation and message (NDJSON report): the run's own output puts
    them above a summary long enough to push them out of an assertion message."""
    failures = []
    for line in events.read_text().splitlines() if events.exists() else []:
        finished = json.loads(line).get("ScenarioFinished")
        if finished is None:
            continue
        for checks in finished["recorder"].get("checks", {}).values():
            for check in checks:
                failure = (check.get("failure_info") or {}).get("failure") or {}
                if check["status"] == "failure":
                    failures.append(f"{failure.get('operation')}: {failure.get('message')}")
    return failures


def hostile_checks(events: Path) -> dict[str, list[str]]:
    """The outcomes of ``hostile_json_is_a_400``, by operation (NDJSON report)."""
    outcomes: dict[str, list[str]] = {}
    for line in events.read_text().splitlines():
        finished = json.loads(line).get("ScenarioFinished")
        if finished is None:
            continue
        recorder = finished["recorder"]
        for checks in recorder.get("checks", {}).values():
            for check in checks:
                if check["name"] == "hostile_json_is_a_400":
                    outcomes.setdefault(recorder["label"], []).append(check["status"])
    return outcomes


@pytest.mark.timeout(600)
async def test_hostile_json_is_a_400_problem_on_every_route(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 31: out-of-range numbers and lone surrogates were 500s on the native and the
    LangGraph routes alike."""
    secret = await cluster.key(PROJECT)
    binary = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert binary is not None, "schemathesis is a dev dependency: pip install -e '.[dev]'"
    config = tmp_path / "schemathesis.toml"
    config.write_text(HOSTILE_CONFIG)
    events = tmp_path / "events.ndjson"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SCHEMATHESIS_HOOKS": "tests.e2e.hostile_json_hooks",
    }
    async with gateway_process(
        cluster, "gateway-hostile", INTERLOCK_STREAM_MAX_SECONDS=STREAM_SECONDS
    ) as gateway:
        process = await asyncio.create_subprocess_exec(
            binary,
            "--config-file",
            str(config),
            "run",
            f"{gateway.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {secret}",
            "--checks",
            f"{CHECKS},hostile_json_is_a_400",
            "--phases",
            "fuzzing",
            "--seed",
            "20261202",
            "--request-timeout",
            "30",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(events),
            "--report-dir",
            str(tmp_path),
            env=env,
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=480)
        text = output.decode(errors="replace")
        assert process.returncode == 0, "\n".join([*failed_checks(events), text[-3000:]])
        async with httpx.AsyncClient() as client:
            spec = (await client.get(f"{gateway.url}/openapi.json")).json()
    with_bodies = {
        f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    }
    outcomes = hostile_checks(events)
    assert any(name.startswith("POST /langgraph/") for name in with_bodies), with_bodies
    missed = with_bodies - {name for name, results in outcomes.items() if "success" in results}
    assert not missed, f"no hostile body reached {sorted(missed)}:\n{text[-3000:]}"
    assert all(result == "success" for results in outcomes.values() for result in results)
