"""Golden fixtures pin every published event version, and ``decode_event`` explains rejections.

Each file in ``tests/fixtures/events`` is a message exactly as the services publish it. A fixture
must decode to its model and re-encode to the same JSON: a schema change that would reject or
alter a message already on the wire fails here. Never edit a published fixture to make a change
pass; add a new version (a new model and new fixtures) instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from shared.events import (
    EVENT_TYPES,
    CancelRequested,
    DecisionSubmitted,
    DispatchKind,
    EventDecodeError,
    ExecutionDispatched,
    ExecutionReported,
    ExecutionRequested,
    ExecutionStatusChanged,
    ExecutionSuspended,
    MessageDeadLettered,
    ReportOutcome,
    ReviewDeadlineReached,
    ThreadDeleteRequested,
    decode_event,
    encode_event,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "events"

EXPECTED: dict[str, type[BaseModel]] = {
    "execution.requested.v1.json": ExecutionRequested,
    "execution.requested.v1.requester-identity.json": ExecutionRequested,
    "execution.requested.v1.stored-as.json": ExecutionRequested,
    "decision.submitted.v1.json": DecisionSubmitted,
    "decision.submitted.v1.actions.json": DecisionSubmitted,
    "decision.submitted.v1.discounted-approvers.json": DecisionSubmitted,
    "decision.submitted.v1.claimed.json": DecisionSubmitted,
    "execution.cancel_requested.v1.json": CancelRequested,
    "thread.delete_requested.v1.json": ThreadDeleteRequested,
    "execution.dispatched.v1.start.json": ExecutionDispatched,
    "execution.dispatched.v1.resume.json": ExecutionDispatched,
    "execution.dispatched.v1.versioned.json": ExecutionDispatched,
    "execution.suspended.v1.json": ExecutionSuspended,
    "execution.suspended.v1.values.json": ExecutionSuspended,
    "execution.reported.v1.started.json": ExecutionReported,
    "execution.reported.v1.started-without-headers.json": ExecutionReported,
    "execution.reported.v1.completed.json": ExecutionReported,
    "execution.reported.v1.failed.json": ExecutionReported,
    "execution.reported.v1.refused.json": ExecutionReported,
    "execution.status.v1.json": ExecutionStatusChanged,
    "review.deadline.v1.escalate.json": ReviewDeadlineReached,
    "message.dead_lettered.v1.json": MessageDeadLettered,
}

ALL_EVENT_MODELS = tuple(EVENT_TYPES.values())


def _raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _decode(name: str) -> BaseModel:
    model = EXPECTED[name]
    if model is MessageDeadLettered:
        return MessageDeadLettered.model_validate(json.loads(_raw(name)))
    return decode_event(_raw(name), ALL_EVENT_MODELS)


def _type_version(model: type[BaseModel]) -> tuple[str, int]:
    return model.model_fields["type"].default, model.model_fields["version"].default


# --- the fixtures -------------------------------------------------------------------------------


def test_every_fixture_file_is_checked() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.json")) == sorted(EXPECTED)


def test_every_published_version_has_a_fixture() -> None:
    pinned = {_type_version(model) for model in EXPECTED.values()}
    published = set(EVENT_TYPES) | {_type_version(MessageDeadLettered)}
    assert published - pinned == set(), "add a golden fixture for each new event version"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_named_after_its_type_and_version(name: str) -> None:
    data = json.loads(_raw(name))
    assert name.startswith(f"{data['type']}.v{data['version']}.")
    assert (data["type"], data["version"]) == _type_version(EXPECTED[name])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_decodes_to_its_model(name: str) -> None:
    event = _decode(name)
    assert type(event) is EXPECTED[name]


@pytest.mark.parametrize(
    "name", sorted(n for n, m in EXPECTED.items() if m is not MessageDeadLettered)
)
def test_fixture_decodes_when_only_its_own_model_is_accepted(name: str) -> None:
    model: Any = EXPECTED[name]
    assert type(decode_event(_raw(name), (model,))) is model


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_round_trips_exactly(name: str) -> None:
    event = _decode(name)
    assert json.loads(encode_event(event)) == json.loads(_raw(name))


def test_dispatch_fixtures_carry_the_input_or_the_decision() -> None:
    start = _decode("execution.dispatched.v1.start.json")
    resume = _decode("execution.dispatched.v1.resume.json")
    assert isinstance(start, ExecutionDispatched)
    assert isinstance(resume, ExecutionDispatched)
    assert start.kind is DispatchKind.START and start.resume is None
    assert start.input is not None and start.input.as_messages()[0].role == "user"
    assert resume.kind is DispatchKind.RESUME and resume.input is None
    assert resume.resume is not None
    assert resume.resume.decided_at is not None
    # Commands published before decided_at existed still decode (it is optional).
    older = json.loads(_raw("execution.dispatched.v1.resume.json"))
    del older["resume"]["decided_at"]
    decoded = decode_event(json.dumps(older).encode(), (ExecutionDispatched,))
    assert isinstance(decoded, ExecutionDispatched) and decoded.resume is not None
    assert decoded.resume.decided_at is None
    # What interrupt(...) returns inside the agent, per interrupt: the flat decision shape.
    [interrupt_id] = resume.resume.interrupt_ids
    assert resume.resume.resume_values() == {
        interrupt_id: {
            "decision": "approve",
            "reviewer_notes": "Photo of the damage attached; approved.",
        }
    }


def test_report_fixtures_cover_every_outcome() -> None:
    outcomes = {
        event.outcome for name in EXPECTED if isinstance(event := _decode(name), ExecutionReported)
    }
    assert outcomes == set(ReportOutcome)
    failed = _decode("execution.reported.v1.failed.json")
    assert isinstance(failed, ExecutionReported) and failed.error is not None
    assert failed.result is None


def test_a_started_report_says_when_the_custom_headers_did_not_open() -> None:
    without = _decode("execution.reported.v1.started-without-headers.json")
    assert isinstance(without, ExecutionReported) and without.outcome is ReportOutcome.STARTED
    assert without.custom_headers_unreadable is not None
    # Optional and left out when None: every report without it is as it was published before.
    plain = _decode("execution.reported.v1.started.json")
    assert isinstance(plain, ExecutionReported) and plain.custom_headers_unreadable is None
    assert "custom_headers_unreadable" not in json.loads(encode_event(plain))


def test_a_suspension_carries_the_graphs_state_values_when_it_has_them() -> None:
    with_values = _decode("execution.suspended.v1.values.json")
    assert isinstance(with_values, ExecutionSuspended) and with_values.values is not None
    assert with_values.values["claim_id"] == "CLM-4821"
    # Optional and left out when None: every suspension without it is as it was published before.
    plain = _decode("execution.suspended.v1.json")
    assert isinstance(plain, ExecutionSuspended) and plain.values is None
    assert "values" not in json.loads(encode_event(plain))


def test_dead_letter_fixture_holds_the_original_message() -> None:
    letter = _decode("message.dead_lettered.v1.json")
    assert isinstance(letter, MessageDeadLettered)
    original = decode_event(letter.payload.encode(), (DecisionSubmitted,))
    assert original.execution_id == letter.key


# --- what outside producers may leave out -------------------------------------------------------


def test_minimal_request_from_an_outside_producer_decodes() -> None:
    raw = json.dumps(
        {
            "type": "execution.requested",
            "version": 1,
            "event_id": "req-1",
            "execution_id": "order-98765-refund",
            "project_id": "acme",
            "workspace_id": "support",
            "agent": "refund-approval",
            "input": {"messages": [{"role": "user", "content": "Refund CLM-4821"}]},
        }
    ).encode()
    event = decode_event(raw, (ExecutionRequested,))
    assert event.input.as_messages()[0].content == "Refund CLM-4821"
    assert event.idempotency_key is None and event.correlation_id is None


def test_minimal_decision_from_an_outside_producer_decodes() -> None:
    raw = json.dumps(
        {
            "type": "decision.submitted",
            "version": 1,
            "event_id": "dec-1",
            "execution_id": "dfc83731-6574-53a3-ad72-b36b1356ee00",
            "project_id": "acme",
            "workspace_id": "support",
            "decision": "reject",
        }
    ).encode()
    event = decode_event(raw, (DecisionSubmitted,))
    assert event.suspension_id is None and event.reviewer_notes is None
    # The message's own id stands in for the decision id: the same on every redelivery.
    assert event.decision_id == "dec-1"
    assert decode_event(raw, (DecisionSubmitted,)).decision_id == "dec-1"


def test_an_outside_message_must_carry_its_event_id() -> None:
    """A generated id would change on every redelivery, so retries could not be recognised."""
    for model, body in (
        (ExecutionRequested, _fixture_dict("execution.requested.v1.json")),
        (DecisionSubmitted, _fixture_dict("decision.submitted.v1.json")),
    ):
        del body["event_id"]
        with pytest.raises(EventDecodeError, match="event_id: a non-empty string is required"):
            decode_event(json.dumps(body).encode(), (model,))


# --- decode_event's reasons ---------------------------------------------------------------------


def _fixture_dict(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_raw(name))
    return data


def _reason(raw: bytes, expected: tuple[Any, ...] = (ExecutionRequested,)) -> str:
    with pytest.raises(EventDecodeError) as info:
        decode_event(raw, expected)
    return str(info.value)


def test_decode_error_is_a_value_error() -> None:
    assert issubclass(EventDecodeError, ValueError)


@pytest.mark.parametrize(
    "raw", [b"", b"not json", b'{"type": "execution.requested"', b"\xff\xfe\x00"]
)
def test_non_json_is_rejected(raw: bytes) -> None:
    assert _reason(raw).startswith("message is not valid JSON")


@pytest.mark.parametrize(
    "raw", [b"[]", b'[{"type": "execution.requested"}]', b'"text"', b"42", b"null"]
)
def test_json_that_is_not_an_object_is_rejected(raw: bytes) -> None:
    assert _reason(raw) == "message must be a JSON object"


def test_unknown_type_is_rejected_with_the_accepted_types() -> None:
    raw = json.dumps({"type": "execution.exploded", "version": 1}).encode()
    reason = _reason(raw, (ExecutionRequested, DecisionSubmitted))
    assert reason == (
        "unexpected event type 'execution.exploded' here; "
        "accepted: ['decision.submitted', 'execution.requested']"
    )


def test_a_known_type_on_the_wrong_topic_is_rejected() -> None:
    reason = _reason(_raw("decision.submitted.v1.json"), (ExecutionRequested,))
    assert (
        reason
        == "unexpected event type 'decision.submitted' here; accepted: ['execution.requested']"
    )


def test_missing_type_is_rejected() -> None:
    data = _fixture_dict("execution.requested.v1.json")
    del data["type"]
    assert _reason(json.dumps(data).encode()).startswith("unexpected event type None here")


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_unsupported_version_is_rejected_with_the_accepted_versions(version: object) -> None:
    data = _fixture_dict("execution.requested.v1.json")
    data["version"] = version
    reason = _reason(json.dumps(data).encode())
    assert reason == f"unsupported version {version!r} of 'execution.requested'; accepted: [1]"


@pytest.mark.parametrize("field", ["agent", "input", "execution_id", "project_id", "workspace_id"])
def test_missing_field_is_named(field: str) -> None:
    data = _fixture_dict("execution.requested.v1.json")
    del data[field]
    reason = _reason(json.dumps(data).encode())
    assert reason == f"invalid execution.requested v1: {field}: Field required"


def test_invalid_nested_field_is_named_by_its_path() -> None:
    data = _fixture_dict("execution.dispatched.v1.resume.json")
    del data["resume"]["interrupt_ids"]
    reason = _reason(json.dumps(data).encode(), (ExecutionDispatched,))
    assert reason == "invalid execution.dispatched v1: resume.interrupt_ids: Field required"


def test_unknown_field_is_rejected() -> None:
    data = _fixture_dict("decision.submitted.v1.json")
    data["priority"] = "high"
    reason = _reason(json.dumps(data).encode(), (DecisionSubmitted,))
    assert reason == "invalid decision.submitted v1: priority: Extra inputs are not permitted"


def test_invalid_value_is_explained() -> None:
    data = _fixture_dict("execution.requested.v1.json")
    data["input"] = {"message": "hi", "messages": [{"content": "hi"}]}
    data["execution_id"] = "has spaces"
    reason = _reason(json.dumps(data).encode())
    assert reason.startswith("invalid execution.requested v1: execution_id: String should match")
    assert "input: Value error, give exactly one of 'message', 'messages' or 'state'" in reason
