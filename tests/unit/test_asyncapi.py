"""The committed AsyncAPI document is the one the code generates, and it says what it should.

When this fails after a change to ``shared/events.py``: ``make asyncapi`` (``python -m
scripts.asyncapi``) rewrites ``docs/asyncapi.yaml``; commit the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from scripts import asyncapi
from shared.activity import ExecutionActivity
from shared.events import EVENT_TYPES, MessageDeadLettered
from shared.topics import Topics

COMMITTED = Path(__file__).resolve().parent.parent.parent / "docs" / "asyncapi.yaml"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    return data


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _payload(document: dict[str, Any], topic: str) -> dict[str, Any]:
    channel = document["channels"][topic]
    (message_ref,) = channel["messages"].values()
    message = _resolve(document, message_ref["$ref"])
    payload: dict[str, Any] = _resolve(document, message["payload"]["$ref"])
    return payload


def test_committed_document_is_up_to_date() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == asyncapi.render("yaml"), (
        "docs/asyncapi.yaml is out of date: run `make asyncapi` and commit it"
    )


def test_rendering_is_deterministic() -> None:
    assert asyncapi.render("yaml") == asyncapi.render("yaml")
    assert asyncapi.render("json") == asyncapi.render("json")


def test_json_and_yaml_carry_the_same_document() -> None:
    import json

    assert json.loads(asyncapi.render("json")) == yaml.safe_load(asyncapi.render("yaml"))


def test_header(document: dict[str, Any]) -> None:
    assert document["asyncapi"] == "3.0.0"
    assert document["info"]["title"] == "Interlock events"
    assert document["info"]["version"] == "0.1.0"
    assert document["defaultContentType"] == "application/json"


def test_one_channel_per_topic(document: dict[str, Any]) -> None:
    topics = Topics().all()
    assert len(topics) == 12
    assert list(document["channels"]) == topics
    for topic, channel in document["channels"].items():
        assert channel["address"] == topic
        assert channel["bindings"]["kafka"]["topic"] == topic
        assert channel["description"]


def test_each_channel_carries_its_event_model(document: dict[str, Any]) -> None:
    models = {model.model_fields["type"].default: model for model in EVENT_TYPES.values()}
    expected: dict[str, type[BaseModel]] = {
        "execution.requested": models["execution.requested"],
        "decision.submitted": models["decision.submitted"],
        "execution.dispatched": models["execution.dispatched"],
        "execution.suspended": models["execution.suspended"],
        "execution.reported": models["execution.reported"],
        "execution.status": models["execution.status"],
        "review.deadline": models["review.deadline"],
        "execution.dead_lettered": MessageDeadLettered,
        "execution.activity": ExecutionActivity,
    }
    for topic, model in expected.items():
        payload = _payload(document, topic)
        assert payload["title"] == model.__name__
        assert set(payload["properties"]) == set(model.model_fields)
        assert payload["properties"]["type"]["const"] == model.model_fields["type"].default


@pytest.mark.parametrize(
    ("topic", "fields"),
    [
        ("execution.requested", {"execution_id", "project_id", "workspace_id", "agent", "input"}),
        ("decision.submitted", {"decision", "reviewer_notes", "reviewer", "suspension_id"}),
        ("execution.dispatched", {"epoch", "kind", "input", "resume"}),
        ("execution.suspended", {"suspend_context", "allowed_decisions", "interrupts"}),
        ("execution.reported", {"epoch", "outcome", "result", "error"}),
        ("execution.status", {"status", "previous_status", "sequence"}),
        ("execution.dead_lettered", {"source_topic", "reason", "payload", "consumer"}),
        ("execution.activity", {"project_id", "change", "progress"}),
    ],
)
def test_payload_schemas_name_the_fields(
    document: dict[str, Any], topic: str, fields: set[str]
) -> None:
    assert fields <= set(_payload(document, topic)["properties"])


def test_nested_schemas_are_components(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    resume = schemas["ResumeInstruction"]["properties"]
    assert {"decision", "reviewer_notes", "interrupt_ids"} <= set(resume)
    assert schemas["DispatchKind"]["enum"] == ["start", "resume"]
    assert set(schemas["ReportOutcome"]["enum"]) == {"started", "completed", "failed", "refused"}


def test_messages_are_keyed_and_json(document: dict[str, Any]) -> None:
    assert "keyed by `execution_id`" in document["info"]["description"]
    assert "JSON-encoded" in document["info"]["description"]
    for message in document["components"]["messages"].values():
        assert message["contentType"] == "application/json"
        assert message["bindings"]["kafka"]["key"]["type"] == "string"
        assert "execution_id" in message["bindings"]["kafka"]["key"]["description"]


def test_operations_say_who_produces_and_consumes(document: dict[str, Any]) -> None:
    operations = document["operations"]
    by_topic: dict[str, set[tuple[str, str]]] = {}
    for operation_id, operation in operations.items():
        party, action, topic = operation_id.split(":")
        assert operation["action"] == action
        assert operation["channel"]["$ref"] == f"#/channels/{topic}"
        assert operation["description"]
        by_topic.setdefault(topic, set()).add((party, action))
    assert by_topic["execution.requested"] == {
        ("gateway", "send"),
        ("external", "send"),
        ("orchestrator", "receive"),
    }
    assert by_topic["execution.dispatched"] == {("orchestrator", "send"), ("sandbox", "receive")}
    assert by_topic["execution.suspended"] == {
        ("sandbox", "send"),
        ("orchestrator", "receive"),
        ("notifier", "receive"),
        ("external", "receive"),
    }
    assert ("orchestrator", "send") in by_topic["execution.status"]
    assert ("external", "receive") in by_topic["execution.dead_lettered"]
    consumer_group = operations["sandbox:receive:execution.dispatched"]["bindings"]["kafka"]
    assert consumer_group["groupId"]["enum"] == ["interlock.sandbox"]


def test_every_reference_resolves(document: dict[str, Any]) -> None:
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    refs.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    assert refs
    for ref in refs:
        _resolve(document, ref)


def test_spec_broker_is_never_connected() -> None:
    app = asyncapi.build_spec_app()
    (broker,) = app.brokers
    assert not broker.running
    assert broker.subscribers and broker.publishers


def test_check_passes_on_a_current_file_and_fails_on_a_stale_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "asyncapi.yaml"
    assert asyncapi.main(["--check", str(target)]) == 1
    assert "does not exist" in capsys.readouterr().err

    assert asyncapi.main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8")
    assert asyncapi.main(["--check", str(target)]) == 0

    target.write_text(target.read_text(encoding="utf-8").replace("suspend_context", "context"))
    assert asyncapi.main(["--check", str(target)]) == 1
    err = capsys.readouterr().err
    assert "is out of date" in err
    assert f"python -m scripts.asyncapi {target}" in err


def test_json_output_by_suffix(tmp_path: Path) -> None:
    target = tmp_path / "asyncapi.json"
    assert asyncapi.main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == asyncapi.render("json")
