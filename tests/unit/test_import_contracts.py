"""The architecture's boundaries, as import contracts (pyproject.toml's [tool.importlinter]):
services never import each other, shared/ imports no service, each store adapter imports only
the ports and its own driver, and the agent API imports nothing from services. ``make lint``
runs them too; here they fail the test suite as well, with import-linter's report."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "services-independent",
    "shared-is-the-base",
    "agent-api",
    "store-mongo",
    "store-sqlite",
    "store-memory",
}


def test_the_boundaries_are_declared() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    declared = {contract["id"] for contract in config["contracts"]}
    assert declared >= REQUIRED, f"missing import contracts: {sorted(REQUIRED - declared)}"


def test_the_code_keeps_every_import_contract() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
