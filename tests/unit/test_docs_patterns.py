"""Conformance: LangGraph's documented human-in-the-loop patterns (tests/fixtures/docs_patterns)
run in plain LangGraph and through Interlock's four services (in process, tests/unit/inprocess.py)
with the same answers, sent as LangGraph sends them (``Command(resume=...)``, Interlock's
``resume``), and end in the same state. Side effects run as often as in LangGraph, or fewer.

The scripts are in tests/fixtures/docs_patterns/scripts.py; the distributed leg, driven by
langgraph-sdk, is tests/e2e/test_docs_patterns.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.gateway.answers import ReviewAnswer
from shared.domain.execution import ExecutionStatus
from shared.events import AgentInput
from shared.graph_input import graph_state
from tests.eventually import eventually
from tests.fixtures.docs_patterns import graphs
from tests.fixtures.docs_patterns.scripts import (
    AGENT_OF,
    AGENTS,
    GO,
    INPUTS,
    SCRIPTS,
    Answer,
    plain_langgraph,
)
from tests.unit.inprocess import REVIEWER, SCOPE, TESTER, World, in_process_world
from tests.unit.test_custom_headers_dev_bus import API, Dev, dev_mode


async def through_interlock(
    world: World, agent: str, answers: list[Answer], start: dict[str, Any] = GO
) -> dict[str, Any]:
    execution = await world.intake.invoke(
        **SCOPE,
        agent=agent,
        agent_input=AgentInput(state=graph_state(start)),
        idempotency_key=None,
        requested_by=TESTER.label,
        requester_identity=TESTER.identity,
    )
    for answer in answers:
        execution = await world.execution(execution.execution_id)
        assert execution.status is ExecutionStatus.SUSPENDED, (execution.status, execution.error)
        assert execution.suspension is not None
        pending = [(i.interrupt_id, i.value) for i in execution.suspension.interrupts]
        await world.intake.decide(
            **SCOPE,
            execution_id=execution.execution_id,
            answer=ReviewAnswer(resume=answer(pending)),
            reviewer=REVIEWER,
        )
    execution = await world.execution(execution.execution_id)
    assert execution.status is ExecutionStatus.COMPLETED, (execution.status, execution.error)
    assert isinstance(execution.result, dict)
    return execution.result


@pytest.fixture
async def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    monkeypatch.setenv("INTERLOCK_AGENTS_FILE", str(agents))
    async with in_process_world(tmp_path, monkeypatch) as built:
        yield built


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_a_docs_pattern_ends_as_in_plain_langgraph(world: World, name: str) -> None:
    factory, answers, compared = SCRIPTS[name]
    graphs.EFFECTS.clear()
    start = INPUTS.get(name, GO)
    expected = await plain_langgraph(factory, answers, start)
    plain_effects = Counter(graphs.EFFECTS)
    graphs.EFFECTS.clear()
    got = await through_interlock(world, AGENT_OF.get(name, name), answers, start)
    interlock_effects = Counter(graphs.EFFECTS)

    assert {k: got.get(k) for k in compared} == {k: expected.get(k) for k in compared}
    said = [m.content for m in expected.get("messages", []) if m.type == "tool"]
    tool_messages = [m for m in got.get("messages", []) if m.get("type", m.get("role")) == "tool"]
    assert [m["content"] for m in tool_messages] == said
    # As often as in LangGraph, or fewer (a durable step or the tool cache keeps a re-run away).
    for effect, times in interlock_effects.items():
        assert times <= plain_effects[effect], (effect, interlock_effects, plain_effects)
    assert set(interlock_effects) == set(plain_effects)


async def moved_past(dev: Dev, execution_id: str, generation: int) -> None:
    """Wait until the execution is no longer at the suspension ``generation`` answered."""

    async def view() -> dict[str, Any]:
        response = await dev.http.get(
            f"{API}/executions/{execution_id}", params={"workspace_id": "default"}
        )
        return dict(response.json())

    await eventually(
        view,
        lambda body: (
            body["status"] in ("completed", "error")
            or (body["status"] == "suspended" and body["generation"] != generation)
        ),
        what=f"{execution_id} past suspension {generation}",
    )


async def through_the_native_api(
    dev: Dev, agent: str, answers: list[Answer], start: dict[str, Any] = GO
) -> dict[str, Any]:
    """The embedded mode's own adapters (SQLite store and checkpointer, the in-process bus, the
    gateway app), answered through ``POST .../resume`` with ``{"resume": ...}``."""
    invoked = await dev.http.post(
        f"{API}/workspaces/default/invoke", json={"agent": agent, "input": start}
    )
    assert invoked.status_code == 202, invoked.text
    execution_id = invoked.json()["execution_id"]
    for answer in answers:
        view = await dev.status(execution_id, "suspended")
        pending = [(r["interrupt_id"], None) for r in view["reviews"]]
        resumed = await dev.http.post(
            f"{API}/executions/{execution_id}/resume",
            params={"workspace_id": "default"},
            json={
                "resume": answer(pending),
                "generation": view["generation"],
                "reviewer_notes": "kept beside the value",
            },
        )
        assert resumed.status_code == 202, resumed.text
        await moved_past(dev, execution_id, view["generation"])
    done = await dev.status(execution_id, "completed", "error")
    assert done["status"] == "completed", done
    return dict(done["result"])


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_a_docs_pattern_ends_as_in_plain_langgraph_in_embedded_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    factory, answers, compared = SCRIPTS[name]
    start = INPUTS.get(name, GO)
    expected = await plain_langgraph(factory, answers, start)
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    monkeypatch.setenv("INTERLOCK_AGENTS_FILE", str(agents))
    async with dev_mode(tmp_path, monkeypatch) as dev:
        got = await through_the_native_api(dev, AGENT_OF.get(name, name), answers, start)
    assert {k: got.get(k) for k in compared} == {k: expected.get(k) for k in compared}
    # The tool patterns compare no state key: what each tool call answered is their state.
    said = [m.content for m in expected.get("messages", []) if m.type == "tool"]
    assert [m["content"] for m in got.get("messages", []) if m.get("type") == "tool"] == said


async def test_an_input_key_the_graph_does_not_have_is_a_400_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph drops an unknown key in silence and the graph fails or runs without it;
    Interlock refuses it before anything is stored, naming what the input has."""
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    monkeypatch.setenv("INTERLOCK_AGENTS_FILE", str(agents))
    async with dev_mode(tmp_path, monkeypatch) as dev:
        refused = await dev.http.post(
            f"{API}/workspaces/default/invoke",
            json={"agent": "state-input", "input": {"topicc": "cats"}},
        )
        assert refused.status_code == 400, refused.text
        problem = refused.json()
        assert problem["type"].endswith("unknown-input-field")
        assert "'topicc'" in problem["detail"] and "approved, joke, topic" in problem["detail"]
        listed = await dev.http.get(f"{API}/executions", params={"workspace_id": "default"})
        assert listed.json()["items"] == []
