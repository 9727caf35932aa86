"""An agent's fingerprint: which version of its code a suspension was taken with.

A checkpoint is only meaningful to the code that wrote it: resuming it with a graph whose nodes,
edges or node code changed can replay steps in the wrong places. Each suspension records the
fingerprint of the agent that suspended, and a resume under another fingerprint is refused
unless the agent declares that version compatible (``compatible_with`` in the registry).

The automatic fingerprint hashes the graph's shape (node names, edges) and the agent's own code:
the source of its node functions, its tools and its state schema, and of every module of its
project (files under its folders, never site-packages) that code refers to, so a change in a
helper module counts and a change to another agent in the same module does not. Where the
graph shows none of its code (its nodes are all the library's), the source of the module that
defines it stands in. ``version`` in the registry overrides it all.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from shared.agents import AgentSpec


def graph_shape(graph: Pregel[Any, Any, Any, Any]) -> dict[str, Any]:
    drawn = graph.get_graph()
    return {
        "nodes": sorted(drawn.nodes),
        "edges": sorted([e.source, e.target, e.conditional] for e in drawn.edges),
    }


def agent_fingerprint(
    spec: AgentSpec, graph: Pregel[Any, Any, Any, Any], factory: Any = None
) -> str:
    if spec.version:
        return spec.version
    digest = hashlib.sha256()
    digest.update(json.dumps(graph_shape(graph), sort_keys=True).encode())
    for source in agent_sources(spec, graph, factory):
        digest.update(source.encode())
    if spec.policy is not None:  # a changed review policy changes what a resume may do
        digest.update(spec.policy.model_dump_json().encode())
    return digest.hexdigest()[:16]


def legacy_fingerprint(spec: AgentSpec, graph: Pregel[Any, Any, Any, Any]) -> str | None:
    """The fingerprint releases before this one computed (the shape and the whole module of the
    factory): accepted beside the current one, so a suspension taken before an upgrade still
    resumes when the agent's code is unchanged. None where ``version`` is set."""
    if spec.version:
        return None
    module = sys.modules.get(spec.factory.rpartition(":")[0])
    digest = hashlib.sha256()
    digest.update(json.dumps(graph_shape(graph), sort_keys=True).encode())
    digest.update((_source(module) if module is not None else "").encode())
    if spec.policy is not None:
        digest.update(spec.policy.model_dump_json().encode())
    return digest.hexdigest()[:16]


def agent_sources(spec: AgentSpec, graph: Pregel[Any, Any, Any, Any], factory: Any) -> list[str]:
    """The source texts the fingerprint covers, in a stable order."""
    roots = project_roots(spec)
    own = [o for o in _agent_objects(graph, factory) if _in_project(o, roots)]
    if not own:
        module = sys.modules.get(spec.factory.rpartition(":")[0])
        return [_source(module)] if module is not None else []
    texts = {f"{_label(o, roots)}\n{_source(o)}" for o in own}
    for module in _project_modules(own, roots):
        texts.add(f"{_label(module, roots)}\n{_source(module)}")
    return sorted(texts)


def project_roots(spec: AgentSpec) -> list[Path]:
    """Where the agent's own code lives, whichever file registered it: a project file's folder
    and import paths, or the folder of the top-level package of a ``module:attribute``."""
    target = spec.factory.rpartition(":")[0]
    if target.endswith(".py"):
        found = [*spec.import_paths, *([spec.folder] if spec.folder else [])]
    else:
        package = sys.modules.get(target.split(".", 1)[0])
        file = getattr(package, "__file__", None)
        found = [Path(file).parent] if file else []
    roots = [p.resolve() for p in found]
    return [r for r in roots if not _is_site_packages(r)]


def _agent_objects(graph: Pregel[Any, Any, Any, Any], factory: Any) -> Iterator[Any]:
    """The functions and classes the graph runs: node functions, tools, the state schema and
    the factory that built it."""
    if callable(factory) and not isinstance(factory, Pregel):
        yield factory
    builder = getattr(graph, "builder", None)
    for schema in (getattr(builder, "state_schema", None), getattr(builder, "input_schema", None)):
        if isinstance(schema, type):
            yield schema
    for node in graph.nodes.values():
        bound = node.bound
        for attribute in ("func", "afunc"):
            function = getattr(bound, attribute, None)
            if callable(function):
                yield inspect.unwrap(function)
        if isinstance(bound, ToolNode):
            for tool in bound.tools_by_name.values():
                for attribute in ("func", "coroutine"):
                    function = getattr(tool, attribute, None)
                    if callable(function):
                        yield inspect.unwrap(function)


def _project_modules(objects: list[Any], roots: list[Path]) -> list[types.ModuleType]:
    """Every project module the objects refer to, and those these refer to in turn."""
    seen: dict[str, types.ModuleType] = {}
    pending = list(objects)
    while pending:
        item = pending.pop()
        for referred in _referred(item):
            module = referred if isinstance(referred, types.ModuleType) else None
            if module is None:
                module = sys.modules.get(getattr(referred, "__module__", "") or "")
            if module is None or module.__name__ in seen or not _in_project(module, roots):
                continue
            seen[module.__name__] = module
            pending.append(module)
    return [seen[name] for name in sorted(seen)]


def _referred(item: Any) -> Iterator[Any]:
    """What a function's code names in its globals, or a module's top-level names."""
    if isinstance(item, types.ModuleType):
        yield from vars(item).values()
        return
    code = getattr(item, "__code__", None)
    namespace = getattr(item, "__globals__", None)
    if code is None or namespace is None:
        return
    for name in _names(code):
        if name in namespace:
            yield namespace[name]


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _names(constant)


def _in_project(item: Any, roots: list[Path]) -> bool:
    module = item if isinstance(item, types.ModuleType) else inspect.getmodule(item)
    file = getattr(module, "__file__", None)
    if not file or not roots:
        return False
    path = Path(file).resolve()
    return not _is_site_packages(path) and any(path.is_relative_to(r) for r in roots)


def _is_site_packages(path: Path) -> bool:
    return "site-packages" in path.parts or "dist-packages" in path.parts


def _label(item: Any, roots: list[Path]) -> str:
    """Where the code is, as a path in its project (not the checkout's absolute path, nor the
    module name a project file is loaded under), and its qualified name."""
    module = item if isinstance(item, types.ModuleType) else inspect.getmodule(item)
    file = Path(getattr(module, "__file__", "") or "").resolve()
    where = next((str(file.relative_to(r)) for r in roots if file.is_relative_to(r)), file.name)
    return f"{where}:{getattr(item, '__qualname__', '')}"


def _source(item: Any) -> str:
    try:
        return inspect.getsource(item)
    except (OSError, TypeError):  # no source on disk (compiled only): the shape alone
        return ""


def compatible(spec: AgentSpec, current: str, suspended_with: str | None) -> bool:
    """May a suspension taken under ``suspended_with`` resume under ``current``?"""
    return (
        suspended_with is None
        or suspended_with == current
        or suspended_with in spec.compatible_with
    )
