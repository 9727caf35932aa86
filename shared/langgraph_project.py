"""A LangGraph project's ``langgraph.json``, read as LangGraph's CLI and server read it: its
``graphs`` become agents, its ``dependencies`` the folders their code is imported from, its
``env`` the variables they run with. Interlock's ``agents.toml`` beside it (same folder) keeps
what LangGraph has no place for: review policies, separation of duties, deadlines.

    {
      "graphs": {"agent": "./src/agent/graph.py:graph"},
      "dependencies": ["."],
      "env": ".env"
    }

A graph is ``./path/to/file.py:attribute`` (relative to the file's folder) or
``package.module:attribute``; the attribute is a compiled graph, a ``StateGraph``, or a factory
(services/sandbox/runner.py says which factories). Pure but for reading the two files: nothing
is imported here, so the gateway and the orchestrator read it too (for names and rules)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

LANGGRAPH_JSON = "langgraph.json"
AGENTS_TOML = "agents.toml"


class ProjectError(ValueError):
    """The ``langgraph.json`` cannot be used: the reason, naming the file and the key."""


@dataclass(frozen=True)
class ProjectGraph:
    name: str
    factory: str
    """``./file.py:attribute`` or ``module:attribute``, as written."""
    description: str = ""


@dataclass(frozen=True)
class Project:
    folder: Path
    graphs: list[ProjectGraph]
    dependencies: list[Path] = field(default_factory=list)
    """Folders put on the import path, resolved against ``folder``."""
    env: dict[str, str] = field(default_factory=dict)


def read_project(path: Path) -> Project:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ProjectError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ProjectError(f"{path}: expected an object with 'graphs'")
    folder = path.resolve().parent
    return Project(
        folder=folder,
        graphs=_graphs(path, data.get("graphs")),
        dependencies=_dependencies(path, folder, data.get("dependencies", [])),
        env=_env(path, folder, data.get("env")),
    )


def _graphs(path: Path, graphs: Any) -> list[ProjectGraph]:
    if not isinstance(graphs, dict) or not graphs:
        raise ProjectError(f"{path}: 'graphs' must map each graph's name to its path")
    found = []
    for name, entry in graphs.items():
        description = ""
        if isinstance(entry, dict):  # {"path": "...", "description": "..."}
            description = str(entry.get("description", ""))
            entry = entry.get("path")
        if not isinstance(entry, str) or ":" not in entry:
            raise ProjectError(
                f"{path}: graphs.{name} must be './file.py:attribute' or 'module:attribute'"
            )
        found.append(ProjectGraph(name=str(name), factory=entry, description=description))
    return found


def _dependencies(path: Path, folder: Path, dependencies: Any) -> list[Path]:
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise ProjectError(f"{path}: 'dependencies' must be a list of folders or packages")
    # Local folders go on the import path; a package name (from PyPI) is the image's business.
    local = [d for d in dependencies if d.startswith((".", "/"))]
    return [(folder / d).resolve() for d in local]


def _env(path: Path, folder: Path, env: Any) -> dict[str, str]:
    if env is None:
        return {}
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    if isinstance(env, str):
        file = folder / env
        if not file.is_file():
            raise ProjectError(f"{path}: env file {env!r} does not exist")
        return {k: v for k, v in dotenv_values(file).items() if v is not None}
    raise ProjectError(f"{path}: 'env' must be a .env file's path or an object")


def resolve_factory(folder: Path, factory: str) -> tuple[str, str]:
    """(``module or file path``, attribute) of a graph reference; a file path made absolute."""
    target, _, attribute = factory.rpartition(":")
    if target.endswith(".py"):
        return str((folder / target).resolve()), attribute
    return target, attribute
