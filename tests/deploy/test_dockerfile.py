"""The Dockerfile and .dockerignore, read as text (no Docker engine here): a pinned base, a
non-root final stage without build tools, the entrypoint the manifests rely on, and a build
context holding the package sources and nothing else."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path

from tests.deploy.dockerfile import dockerignore_excludes, final_stage_user, stages
from tests.deploy.manifests import REPO

BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|cc|clang|make|build-essential|apt-get|apt|apk|dnf|yum|pip install"
    r"|python3?-dev|libc6?-dev)\b"
)


def test_both_stages_use_one_exact_python_release() -> None:
    bases = {stage.base for stage in stages()}
    assert len(bases) == 1, f"the virtualenv must run on the interpreter it was built with: {bases}"
    (base,) = bases
    # An exact patch release on a named Debian release (a digest may follow); never "latest".
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", base)
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"


def test_the_final_stage_runs_as_a_fixed_unprivileged_user() -> None:
    final = stages()[-1]
    uid = final_stage_user()
    assert uid >= 1000
    assert final.all("USER")[-1] == f"{uid}:{uid}"
    (created,) = [run for run in final.all("RUN") if "useradd" in run]
    assert f"--uid {uid}" in created and f"--gid {uid}" in created


def test_the_final_stage_has_no_build_tools_and_only_copies_the_built_virtualenv() -> None:
    build, final = stages()[0], stages()[-1]
    assert len(stages()) == 2 and build.name
    for run in final.all("RUN"):
        assert not BUILD_TOOLS.search(run), run
    for copy in final.all("COPY"):
        assert copy.startswith(f"--from={build.name} "), (
            f"final stage copies from the context: {copy}"
        )


def test_the_entrypoint_runs_a_service_named_by_the_argument() -> None:
    final = stages()[-1]
    assert json.loads(final.all("ENTRYPOINT")[-1]) == ["interlock", "service"]
    assert json.loads(final.all("CMD")[-1]) == ["gateway"]
    exposed = {port for line in final.all("EXPOSE") for port in line.split()}
    assert exposed == {"8000", "8081"}
    env = " ".join(final.all("ENV"))
    # What the manifests and compose file assume of the image.
    for setting in (
        "INTERLOCK_ENVIRONMENT=production",
        "INTERLOCK_HOST=0.0.0.0",
        "INTERLOCK_PORT=8000",
        "INTERLOCK_HEALTH_HOST=0.0.0.0",
        "INTERLOCK_HEALTH_PORT=8081",
        "HOME=/tmp",
    ):
        assert setting in env.split(), setting


# ---------------------------------------------------------------- the build context


def test_the_context_holds_the_package_sources_and_nothing_else() -> None:
    for kept in (
        "pyproject.toml",
        "README.md",
        "constraints.txt",
        "shared/settings.py",
        "services/gateway/web/static/app.js",
        "interlock/cli.py",
        "agents/agents.toml",
    ):
        assert not dockerignore_excludes(kept), kept
    for left_out in (
        ".venv/bin/python",
        ".infra/bin/kustomize",
        ".interlock/dev/interlock.db",
        ".git/HEAD",
        "tests/unit/test_state_machine.py",
        ".artifacts/review.png",
        ".hypothesis/examples/x",
        ".schemathesis/x",
        ".mypy_cache/3.11/x.json",
        "shared/__pycache__/settings.cpython-311.pyc",
        "__pycache__/x.pyc",
        "deploy/compose.yaml",
        "Dockerfile",
        ".env",
    ):
        assert dockerignore_excludes(left_out), left_out


def test_the_context_has_everything_the_wheel_is_built_from() -> None:
    """Every package setuptools finds (pyproject's include patterns), the readme, and each COPY
    source of the build stage pass the .dockerignore."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    includes = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [
        folder.name
        for folder in REPO.iterdir()
        if (folder / "__init__.py").is_file()
        and any(fnmatch.fnmatchcase(folder.name, pattern) for pattern in includes)
    ]
    assert sorted(packages) == ["agents", "interlock", "services", "shared"]
    for package in packages:
        for source in (REPO / package).rglob("*"):
            relative = source.relative_to(REPO).as_posix()
            if source.is_file() and "__pycache__" not in relative:
                assert not dockerignore_excludes(relative), relative
    assert not dockerignore_excludes(project["project"]["readme"])
    build = stages()[0]
    for copy in build.all("COPY"):
        *sources, _destination = copy.split()
        for source in sources:
            assert (REPO / source).exists(), source
            assert not dockerignore_excludes(source.rstrip("/")), source
            copied = Path(source.rstrip("/"))
            # The constraints pin the image's dependencies to the versions the suite ran with.
            allowed = [*packages, "pyproject.toml", "README.md", "constraints.txt"]
            assert copied.parts[0] in allowed, source
