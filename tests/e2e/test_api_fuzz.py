"""Schemathesis against the served OpenAPI spec, with a valid owner key: no 5xx, and every
response conforms to the spec (status codes, content types, bodies)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT

pytestmark = pytest.mark.e2e

CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    )
)


@pytest.mark.timeout(600)
async def test_the_served_api_holds_to_its_spec(cluster: Cluster, tmp_path: Path) -> None:
    secret = await cluster.key(PROJECT)
    binary = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert binary is not None, "schemathesis is a dev dependency: pip install -e '.[dev]'"
    process = await asyncio.create_subprocess_exec(
        binary,
        "run",
        f"{cluster.base_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {secret}",
        "--checks",
        CHECKS,
        "--max-examples",
        "40",
        "--seed",
        "20261130",
        "--request-timeout",
        "30",
        "--report-dir",
        str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=540)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-6000:]
