"""constraints.txt pins every dependency pyproject.toml declares (the dev extra too) to a version
its specifier accepts, so `make venv`, CI and the image install what the suite ran with."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.manifests import REPO


def pins() -> dict[str, str]:
    found = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, version = line.partition("==")
        assert version, f"constraints.txt: {line!r} is not an exact pin"
        found[canonicalize_name(name)] = version
    return found


def test_every_declared_dependency_is_pinned_to_a_version_it_accepts() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pinned = pins()
    for text in declared:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not in constraints.txt: run `make lock`"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {requirement.name}=={pinned[name]}, outside {text!r}:"
            " run `make lock`"
        )
