"""The deploy checks run without a cluster or Docker: kustomize renders the overlays (built once
from its Go module by deploy/tools.sh), and the tests read what it renders."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.deploy.manifests import REPO, Manifests

OVERLAYS = ("dev", "prod")


def _run(command: list[str], what: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        pytest.fail(f"{what} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout


@pytest.fixture(scope="session")
def kustomize() -> Path:
    """The kustomize binary, installed under .infra/bin on first use (about a minute)."""
    return Path(_run(["bash", str(REPO / "deploy" / "tools.sh")], "deploy/tools.sh").strip())


@pytest.fixture(scope="session")
def rendered(kustomize: Path) -> dict[str, Manifests]:
    """Each overlay as `kustomize build` renders it (what `kubectl apply -k` would send)."""
    return {
        overlay: Manifests.parse(
            _run(
                [str(kustomize), "build", str(REPO / "deploy" / "k8s" / "overlays" / overlay)],
                f"kustomize build overlays/{overlay}",
            )
        )
        for overlay in OVERLAYS
    }


@pytest.fixture(scope="session")
def prod(rendered: dict[str, Manifests]) -> Manifests:
    return rendered["prod"]


@pytest.fixture(scope="session")
def dev(rendered: dict[str, Manifests]) -> Manifests:
    return rendered["dev"]
