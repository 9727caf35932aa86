"""The OpenAPI document links an invoke's 202 to every route that takes the execution it
started (issue 21), with parameters those routes have, and schemathesis reads each link as a
stateful transition (tests/e2e/test_api_fuzz.py checks that its run follows every one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.store.memory import InMemoryStore
from tests.direct_bus import DirectBus

INVOKE = "/api/v1/projects/{project_id}/workspaces/{workspace_id}/invoke"
LINKS = {"GetExecution", "GetAudit", "Resume", "Cancel", "Stream"}


@pytest.fixture
def spec(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    # create_app would reconfigure structlog for the whole process (see test_cli.py).
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(settings, store=InMemoryStore(), publisher=DirectBus())
    document: dict[str, Any] = app.openapi()
    return document


def pointer(document: dict[str, Any], reference: str) -> Any:
    assert reference.startswith("#/"), reference
    node: Any = document
    for part in reference[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def invoke_links(spec: dict[str, Any]) -> dict[str, Any]:
    links: dict[str, Any] = spec["paths"][INVOKE]["post"]["responses"]["202"]["links"]
    return links


def parameters_of(operation: dict[str, Any]) -> set[str]:
    return {f"{p['in']}.{p['name']}" for p in operation.get("parameters", [])}


def test_the_invoke_response_links_every_route_of_the_execution(spec: dict[str, Any]) -> None:
    links = invoke_links(spec)
    assert set(links) == LINKS
    linked = {pointer(spec, link["operationRef"])["operationId"] for link in links.values()}
    # Every operation that takes an execution id is linked, so a new one cannot be forgotten.
    takes_the_id = {
        operation["operationId"]
        for path, item in spec["paths"].items()
        for operation in item.values()
        if "path.execution_id" in parameters_of(operation)
    }
    assert linked == takes_the_id


@pytest.mark.parametrize("name", sorted(LINKS))
def test_each_link_fills_the_target_from_the_invoke(spec: dict[str, Any], name: str) -> None:
    link = invoke_links(spec)[name]
    target = pointer(spec, link["operationRef"])
    parameters = link["parameters"]
    assert parameters["path.execution_id"] == "$response.body#/execution_id"
    assert parameters["path.project_id"] == "$request.path.project_id"
    assert parameters["query.workspace_id"] == "$request.path.workspace_id"
    # Only parameters the target has, and every one it requires.
    assert set(parameters) <= parameters_of(target)
    required = {f"{p['in']}.{p['name']}" for p in target["parameters"] if p.get("required")}
    assert required <= set(parameters)
    assert link["description"]
    accepted = spec["paths"][INVOKE]["post"]["responses"]["202"]
    assert (
        "execution_id"
        in pointer(spec, accepted["content"]["application/json"]["schema"]["$ref"])["required"]
    )


def test_the_stream_link_stops_at_the_review(spec: dict[str, Any]) -> None:
    # A stream left open until the end would hold a follower of the link until it times out.
    assert invoke_links(spec)["Stream"]["parameters"]["query.until"] == "suspended"


def references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def test_every_reference_in_the_document_resolves(spec: dict[str, Any]) -> None:
    """A dangling ``$ref`` (a request body's ``#/$defs/...``) made schemathesis skip the resume
    route altogether, and with it the Resume link."""
    for reference in set(references(spec)):
        assert isinstance(pointer(spec, reference), dict), reference


def test_no_operation_documents_a_422(spec: dict[str, Any]) -> None:
    """Validation errors are 400 problems; FastAPI's default 422 is never sent."""
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert "422" not in operation["responses"], (method, path)


def test_schemathesis_has_a_transition_per_declared_link(spec: dict[str, Any]) -> None:
    # Through the state machine's transitions (not public API; schemathesis is pinned in
    # constraints.txt): the transition ids are what its reports name the links it followed.
    machine = schemathesis.openapi.from_dict(spec).as_state_machine()
    transitions = machine._transitions.operations[f"POST {INVOKE}"].outgoing
    declared = {t.name for t in transitions if not t.is_inferred and t.status_code == "202"}
    assert declared == LINKS
