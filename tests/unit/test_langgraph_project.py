"""Agents loaded as LangGraph projects are: a ``langgraph.json`` (``graphs``, ``dependencies``,
``env``) beside or instead of ``agents.toml``, a module exporting a compiled ``graph``, imports
from the project with no PYTHONPATH; a broken agent leaves the others serving; the fingerprint
covers the agent's own helper modules and ignores a sibling agent in the same module."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from services.sandbox.loading import AgentNotLoadable, GraphCache
from shared.agents import RegistryError, load_registry

GRAPH = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from {helper} import greeting


class State(TypedDict, total=False):
    topic: str
    text: str


def write(state: State) -> dict:
    return {{"text": greeting(state["topic"])}}


def review(state: State) -> dict:
    return {{"text": interrupt({{"draft": state["text"]}})}}


builder = StateGraph(State)
builder.add_node("write", write)
builder.add_node("review", review)
builder.add_edge(START, "write")
builder.add_edge("write", "review")
builder.add_edge("review", END)
graph = builder.compile()
"""


def project(tmp_path: Path, *, name: str = "proj", helper_text: str = "hello") -> Path:
    """A project laid out as LangGraph's docs lay it out: src/agent/graph.py exporting
    ``graph``, a helper module it imports, langgraph.json, an .env file."""
    root = tmp_path / name
    package = root / "src" / f"{name}_agent"
    package.mkdir(parents=True)
    helper = f"{name}_helpers"
    (root / "src" / f"{helper}.py").write_text(
        f"def greeting(topic: str) -> str:\n    return f'{helper_text} {{topic}}'\n"
    )
    (package / "graph.py").write_text(textwrap.dedent(GRAPH.format(helper=helper)))
    (root / ".env").write_text(f"{name.upper()}_SETTING=from-env-file\n")
    config = {
        "graphs": {"writer": f"./src/{name}_agent/graph.py:graph"},
        "dependencies": [".", "./src"],
        "env": ".env",
    }
    (root / "langgraph.json").write_text(json.dumps(config))
    return root


def cache(config: Path) -> GraphCache:
    return GraphCache(load_registry(config), InMemorySaver())


async def test_a_langgraph_project_runs_with_no_pythonpath(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert str(root / "src") not in sys.path
    graphs = cache(root / "langgraph.json")
    loaded = graphs.get("writer")
    config = {"configurable": {"thread_id": "t"}}
    await loaded.graph.ainvoke({"topic": "cats"}, config)
    state = await loaded.graph.aget_state(config)
    assert state.values["text"] == "hello cats"
    assert [i.value for i in state.interrupts] == [{"draft": "hello cats"}]
    assert os.environ["PROJ_SETTING"] == "from-env-file"
    assert loaded.version.input_keys == ["text", "topic"]


def test_agents_toml_beside_it_adds_rules_to_its_graphs_and_agents_of_its_own(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    (root / "agents.toml").write_text(
        textwrap.dedent(
            """
            [agents.writer]
            description = "Writes, then asks."
            [agents.writer.review]
            self_approval = false

            [agents.refund-approval]
            factory = "agents.refund_approval:build_graph"
            """
        )
    )
    for path in (root / "agents.toml", root / "langgraph.json"):
        registry = load_registry(path)
        assert registry.names() == ["refund-approval", "writer"]
        writer = registry.get("writer")
        assert writer is not None and writer.review.self_approval is False
        assert writer.factory == "./src/proj_agent/graph.py:graph"


def test_a_rules_table_for_a_graph_that_does_not_exist_or_with_its_own_factory_is_refused(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    (root / "agents.toml").write_text("[agents.writre.review]\nself_approval = false\n")
    with pytest.raises(RegistryError, match=r"no graph of .* is named 'writre'"):
        load_registry(root / "agents.toml")
    (root / "agents.toml").write_text('[agents.writer]\nfactory = "x.y:z"\n')
    with pytest.raises(RegistryError, match="leave 'factory' out"):
        load_registry(root / "agents.toml")


def test_a_broken_agent_is_reported_and_the_others_serve(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "broken.py").write_text("import no_such_module_anywhere\ngraph = None\n")
    (root / "not_a_graph.py").write_text("graph = 42\n")
    config = json.loads((root / "langgraph.json").read_text())
    config["graphs"] |= {"broken": "./broken.py:graph", "number": "./not_a_graph.py:graph"}
    (root / "langgraph.json").write_text(json.dumps(config))
    graphs = cache(root / "langgraph.json")
    assert [a.spec.name for a in graphs.load_all()] == ["writer"]
    assert set(graphs.unloadable) == {"broken", "number"}
    assert "No module named 'no_such_module_anywhere'" in graphs.unloadable["broken"]
    assert "is a int, not a graph" in graphs.unloadable["number"]
    with pytest.raises(AgentNotLoadable):
        graphs.get("broken")


def test_factories_take_a_checkpointer_a_config_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "factories.py").write_text(
        textwrap.dedent(
            """
            from langgraph.graph import START, MessagesState, StateGraph

            def _builder():
                b = StateGraph(MessagesState)
                b.add_node("n", lambda s: {})
                b.add_edge(START, "n")
                return b

            def with_checkpointer(checkpointer):
                return _builder().compile(checkpointer=checkpointer)

            def with_config(config):
                assert "configurable" in config
                return _builder().compile()

            def without_arguments():
                return _builder()

            builder = _builder()
            """
        )
    )
    (tmp_path / "langgraph.json").write_text(
        json.dumps(
            {
                "graphs": {
                    name: f"./factories.py:{name}"
                    for name in ("with_checkpointer", "with_config", "without_arguments", "builder")
                }
            }
        )
    )
    graphs = cache(tmp_path / "langgraph.json")
    assert len(graphs.load_all()) == 4, graphs.unloadable


def fingerprint_of(root: Path) -> str:
    """A new sandbox's fingerprint of ``writer``: the project's modules imported afresh."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root.resolve()):
            del sys.modules[name]
    return cache(root / "langgraph.json").get("writer").fingerprint


def test_the_fingerprint_covers_the_helper_module_the_agent_imports(tmp_path: Path) -> None:
    root = project(tmp_path, name="fpa")
    first = fingerprint_of(root)
    assert fingerprint_of(root) == first  # nothing changed: the same version
    helper = root / "src" / "fpa_helpers.py"
    helper.write_text(helper.read_text().replace("hello", "goodbye"))
    assert fingerprint_of(root) != first


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_the_fingerprint_ignores_a_sibling_agent_in_the_same_module(tmp_path: Path) -> None:
    (tmp_path / "pair.py").write_text(
        textwrap.dedent(
            """
            from langgraph.graph import START, MessagesState, StateGraph

            def mine(state):
                return {}

            def theirs(state):
                return {}

            def _graph(node):
                b = StateGraph(MessagesState)
                b.add_node("n", node)
                b.add_edge(START, "n")
                return b.compile()

            one = _graph(mine)
            other = _graph(theirs)
            """
        )
    )
    (tmp_path / "langgraph.json").write_text(
        json.dumps({"graphs": {"writer": "./pair.py:one", "other": "./pair.py:other"}})
    )
    before = fingerprint_of(tmp_path)
    pair = tmp_path / "pair.py"
    pair.write_text(
        pair.read_text().replace(
            "def theirs(state):\n    return {}", "def theirs(state):\n    return {'changed': True}"
        )
    )
    assert "changed" in pair.read_text()
    assert fingerprint_of(tmp_path) == before
    pair.write_text(
        pair.read_text().replace(
            "def mine(state):\n    return {}", "def mine(state):\n    return {'mine': 1}"
        )
    )
    assert fingerprint_of(tmp_path) != before


def test_a_suspension_fingerprinted_by_the_previous_release_still_resumes() -> None:
    """The previous release hashed the graph's shape and the factory's whole module; the same
    code under this release's fingerprint accepts that version (no suspension is stranded by
    the upgrade)."""
    import hashlib
    import inspect

    from services.sandbox.fingerprint import graph_shape
    from shared.settings import DEFAULT_AGENTS_FILE

    graphs = cache(DEFAULT_AGENTS_FILE)
    loaded = graphs.get("refund-approval")
    digest = hashlib.sha256()
    digest.update(json.dumps(graph_shape(loaded.graph), sort_keys=True).encode())
    digest.update(inspect.getsource(sys.modules["agents.refund_approval"]).encode())
    previous = digest.hexdigest()[:16]
    assert loaded.fingerprint != previous
    assert loaded.version.accepts(previous)


async def test_interlock_dev_serves_a_langgraph_project_beside_a_broken_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedded mode's own adapters (as ``interlock dev`` wires them) pointed at the project's
    langgraph.json: its graph runs from its input state to its interrupt and on to the end with
    the value sent, while the broken agent beside it only fails its own executions."""
    from tests.unit.test_custom_headers_dev_bus import API, dev_mode

    root = project(tmp_path, name="devproj")
    (root / "broken.py").write_text("raise RuntimeError('this agent does not load')\n")
    config = json.loads((root / "langgraph.json").read_text())
    config["graphs"]["broken"] = "./broken.py:graph"
    (root / "langgraph.json").write_text(json.dumps(config))
    monkeypatch.setenv("INTERLOCK_AGENTS_FILE", str(root / "langgraph.json"))
    (tmp_path / "dev").mkdir()
    async with dev_mode(tmp_path / "dev", monkeypatch) as dev:
        invoked = await dev.http.post(
            f"{API}/workspaces/default/invoke", json={"agent": "writer", "input": {"topic": "x"}}
        )
        assert invoked.status_code == 202, invoked.text
        writer = invoked.json()["execution_id"]
        waiting = await dev.status(writer, "suspended")
        resumed = await dev.http.post(
            f"{API}/executions/{writer}/resume",
            params={"workspace_id": "default"},
            json={"resume": "an edited text", "generation": waiting["generation"]},
        )
        assert resumed.status_code == 202, resumed.text
        done = await dev.status(writer, "completed", "error")
        assert done["result"]["text"] == "an edited text", done

        broken = await dev.http.post(
            f"{API}/workspaces/default/invoke", json={"agent": "broken", "message": "hi"}
        )
        failed = await dev.status(broken.json()["execution_id"], "error", "completed")
        assert failed["error"]["error_type"] == "AgentNotLoadable"
        assert "this agent does not load" in failed["error"]["message"]

        # Reported where clients look: the agents route and LangGraph's assistants.
        listed = (await dev.http.get(f"{API}/agents", params={"workspace_id": "default"})).json()
        errors = {agent["name"]: agent["load_error"] for agent in listed["items"]}
        assert errors["writer"] is None
        assert "this agent does not load" in (errors["broken"] or "")
        langgraph = "/langgraph/projects/demo/workspaces/default"
        found = await dev.http.post(f"{langgraph}/assistants/search", json={})
        metadata = {a["graph_id"]: a["metadata"] for a in found.json()}
        assert metadata["writer"] == {"created_by": "system"}
        assert "this agent does not load" in metadata["broken"]["load_error"]
        # The graph the sandbox loaded is drawn; the one it cannot load cannot be.
        drawn = (await dev.http.get(f"{langgraph}/assistants/writer/graph")).json()
        assert {n["id"] for n in drawn["nodes"]} == {"__start__", "write", "review", "__end__"}
        refused = await dev.http.get(f"{langgraph}/assistants/broken/graph")
        assert refused.status_code == 422, refused.text
        assert "this agent does not load" in refused.json()["detail"]


def test_a_module_agent_has_one_fingerprint_whichever_agents_file_registers_it(
    tmp_path: Path,
) -> None:
    """The fingerprint of ``agents.refund_approval:build_graph`` does not depend on where the
    agents file is: a sandbox started with another file (a test's, an operator's copy) must not
    publish a version that refuses the other sandboxes' suspensions."""
    from shared.settings import DEFAULT_AGENTS_FILE

    copy = tmp_path / "elsewhere" / "agents.toml"
    copy.parent.mkdir()
    copy.write_text('[agents.refund-approval]\nfactory = "agents.refund_approval:build_graph"\n')
    here = cache(DEFAULT_AGENTS_FILE).get("refund-approval").fingerprint
    assert cache(copy).get("refund-approval").fingerprint == here
