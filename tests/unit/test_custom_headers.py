"""Callers' custom headers: limits, sealing for the bus, carrying through the consume wrapper,
opening in the sandbox, and what a run does with a set that does not open (issue 17, finding 6).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from services.orchestrator import state_machine as sm
from shared.bus import Consumer, Delivery, carried_headers
from shared.crypto import Keyring, new_key_entry
from shared.custom_headers import (
    MAX_COUNT,
    MAX_TOTAL_BYTES,
    MAX_VALUE_BYTES,
    PURPOSE,
    SEALED_HEADER,
    CustomHeadersRejected,
    SealingPublisher,
    open_carried,
    seal,
    within_limits,
)
from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.events import (
    AgentInput,
    ExecutionReported,
    ExecutionRequested,
    ReportOutcome,
    decode_event,
    encode_event,
)
from tests.factories import pending

KEYRING = Keyring.parse(new_key_entry("k1"))
SECRET = "Bearer end-user-token-3f9c1e"


def headers(**values: str) -> dict[str, str]:
    return {f"x-interlock-custom-{name}": value for name, value in values.items()}


# --- limits -------------------------------------------------------------------------------------


def test_custom_headers_within_the_limits_are_picked_lowercased() -> None:
    items = [("X-Interlock-Custom-Token", SECRET), ("Authorization", "Bearer ilk_x"), ("a", "b")]
    assert within_limits(items) == {"x-interlock-custom-token": SECRET}
    at_limit = [(f"x-interlock-custom-h{i}", "v" * 200) for i in range(MAX_COUNT)]
    assert len(within_limits(at_limit)) == MAX_COUNT


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ([(f"x-interlock-custom-h{i}", "v") for i in range(MAX_COUNT + 1)], "more than 32"),
        # The same name repeated counts each time: a flood cannot hide behind one name.
        ([("x-interlock-custom-h", "v")] * (MAX_COUNT + 1), "more than 32"),
        ([("x-interlock-custom-big", "v" * (MAX_VALUE_BYTES + 1))], "4097 bytes"),
        ([(f"x-interlock-custom-h{i}", "v" * 3000) for i in range(3)], f"{MAX_TOTAL_BYTES} bytes"),
    ],
    ids=["count", "repeated-name", "value", "total"],
)
def test_custom_headers_over_a_limit_are_refused(items: list[tuple[str, str]], says: str) -> None:
    with pytest.raises(CustomHeadersRejected, match=says):
        within_limits(items)


# --- sealing and opening ------------------------------------------------------------------------


def test_sealed_headers_open_for_the_same_execution_only() -> None:
    sealed = seal({**headers(token=SECRET), "traceparent": "00-abc"}, KEYRING, "exec-1")
    assert set(sealed) == {SEALED_HEADER, "traceparent"}
    assert SECRET not in json.dumps(sealed)
    opened = open_carried(sealed, KEYRING, "exec-1")
    assert opened.headers == headers(token=SECRET) and opened.unreadable is None
    moved = open_carried(sealed, KEYRING, "exec-2")
    assert moved.headers == {} and moved.unreadable is not None
    assert "another purpose or context" in moved.unreadable


def test_no_custom_headers_means_no_sealed_header() -> None:
    assert seal({"traceparent": "00-abc"}, KEYRING, "exec-1") == {"traceparent": "00-abc"}
    assert open_carried({}, KEYRING, "exec-1").headers == {}


@pytest.mark.parametrize("how", ["foreign key", "tampered", "garbage"])
def test_a_set_that_does_not_open_is_left_out_with_the_reason(how: str) -> None:
    token = seal(headers(token=SECRET), KEYRING, "exec-1")[SEALED_HEADER]
    if how == "foreign key":  # another process's in-memory key, or one rotated out
        token = seal(headers(token=SECRET), Keyring.parse(new_key_entry("k9")), "exec-1")[
            SEALED_HEADER
        ]
    elif how == "tampered":
        body = token.rsplit(".", 1)[1]
        token = token[: -len(body)] + ("A" if body[0] != "A" else "B") + body[1:]
    else:
        token = "not a token"
    opened = open_carried({SEALED_HEADER: token}, KEYRING, "exec-1")
    assert opened.headers == {}
    assert opened.unreadable is not None and SECRET not in opened.unreadable


def test_a_sealed_payload_that_is_not_a_header_set_is_left_out() -> None:
    for payload in (b"[1, 2]", b'{"authorization": "x"}', b"\xff"):
        token = KEYRING.seal(payload, purpose=PURPOSE, context="exec-1")
        opened = open_carried({SEALED_HEADER: token}, KEYRING, "exec-1")
        assert opened.headers == {} and opened.unreadable is not None


def test_plain_headers_of_an_outside_producer_pass_through_and_the_sealed_set_wins() -> None:
    """An outside producer on the topic interface may still send plain headers (it put them on
    its broker itself); a name also in the sealed set takes the sealed value."""
    carried = {
        **headers(token="plain-old", tenant="acme"),
        **seal(headers(token=SECRET), KEYRING, "exec-1"),
    }
    opened = open_carried(carried, KEYRING, "exec-1")
    assert opened.headers == headers(token=SECRET, tenant="acme")


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str] | None]] = []

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        self.sent.append((topic, headers))


def request(execution_id: str = "exec-1") -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=execution_id,
        project_id="p",
        workspace_id="w",
        agent="refund-approval",
        input=AgentInput(message="hi"),
    )


async def test_the_gateway_publisher_seals_with_the_event_execution_id() -> None:
    inner = Recorder()
    publisher = SealingPublisher(inner, KEYRING)
    await publisher.publish(request("exec-7"), "t", key="exec-7", headers=headers(token=SECRET))
    await publisher.publish(request("exec-8"), "t", key="exec-8", headers={})
    [(_, sealed), (_, empty)] = inner.sent
    assert sealed is not None and list(sealed) == [SEALED_HEADER]
    assert open_carried(sealed, KEYRING, "exec-7").headers == headers(token=SECRET)
    assert not empty


async def test_the_consume_wrapper_carries_the_sealed_set_unopened() -> None:
    """What the orchestrator forwards on its dispatch is exactly what it received."""
    seen: list[dict[str, str]] = []

    async def handle(event: ExecutionRequested) -> None:
        seen.append(carried_headers())

    consumer: Consumer[ExecutionRequested] = Consumer(
        name="orchestrator:execution.requested",
        decode=lambda raw: decode_event(raw, (ExecutionRequested,)),
        handle=handle,
        publisher=Recorder(),
        dead_letter_topic="execution.dead_lettered",
    )
    sealed = seal(headers(token=SECRET), KEYRING, "exec-1")
    wire: dict[str, Any] = {**sealed, "content-type": "application/json", "event-type": "x"}
    await consumer.deliver(
        Delivery(
            topic="execution.requested",
            partition=0,
            offset=1,
            key="exec-1",
            body=encode_event(request()),
            headers=wire,
        )
    )
    assert seen == [sealed]
    assert carried_headers() == {}  # outside a message: nothing


# --- the audit trail of a run without them ------------------------------------------------------


def started(epoch: int, unreadable: str | None) -> ExecutionReported:
    return ExecutionReported(
        event_id=f"exec-1:started:{epoch}",
        execution_id="exec-1",
        project_id="p",
        workspace_id="w",
        epoch=epoch,
        outcome=ReportOutcome.STARTED,
        custom_headers_unreadable=unreadable,
    )


def make_execution(*, status: ExecutionStatus, epoch: int) -> Execution:
    return pending("exec-1").model_copy(update={"status": status, "epoch": epoch})


def unreadable_entries(execution: Execution) -> list[AuditEntry]:
    return [a for a in execution.audit if a.action == sm.CUSTOM_HEADERS_UNREADABLE]


def test_a_run_without_its_headers_is_in_the_audit_trail_once() -> None:
    execution = make_execution(status=ExecutionStatus.PENDING, epoch=1)
    outcome = sm.on_started(execution, started(1, "the sealed custom headers do not open"))
    assert outcome.execution.status is ExecutionStatus.RUNNING
    [entry] = unreadable_entries(outcome.execution)
    assert entry.actor == "sandbox" and entry.event_id == "exec-1:started:1"
    assert entry.reason is not None and "do not open" in entry.reason
    again = sm.on_started(outcome.execution, started(1, "the sealed custom headers do not open"))
    assert again.ignored and len(unreadable_entries(again.execution)) == 1


def test_the_entry_is_recorded_when_the_suspension_overtook_the_report() -> None:
    execution = make_execution(status=ExecutionStatus.SUSPENDED, epoch=1)
    outcome = sm.on_started(execution, started(1, "altered"))
    assert outcome.changed and not outcome.transitions
    assert outcome.execution.status is ExecutionStatus.SUSPENDED
    assert len(unreadable_entries(outcome.execution)) == 1
    finished = make_execution(status=ExecutionStatus.CANCELLED, epoch=1)
    assert sm.on_started(finished, started(1, "altered")).ignored
    stale = make_execution(status=ExecutionStatus.RESUMING, epoch=2)
    assert sm.on_started(stale, started(1, "altered")).ignored


def test_a_run_with_its_headers_adds_no_entry() -> None:
    execution = make_execution(status=ExecutionStatus.PENDING, epoch=1)
    outcome = sm.on_started(execution, started(1, None))
    assert outcome.execution.status is ExecutionStatus.RUNNING
    assert unreadable_entries(outcome.execution) == []


# --- every process of `interlock up` holds the same key -----------------------------------------


def test_interlock_up_gives_its_services_one_key() -> None:
    from interlock.supervisor import shared_encryption_keys

    made = shared_encryption_keys({"PATH": "/usr/bin"})
    assert made["PATH"] == "/usr/bin"
    Keyring.parse(made["INTERLOCK_ENCRYPTION_KEYS"])
    given = {"INTERLOCK_ENCRYPTION_KEYS": new_key_entry("mine")}
    assert shared_encryption_keys(given) == given


def test_the_cli_prints_a_fresh_entry_on_stdout_only() -> None:
    from typer.testing import CliRunner

    from interlock.cli import app

    first = CliRunner().invoke(app, ["keys", "encryption-key", "--key-id", "k2"])
    second = CliRunner().invoke(app, ["keys", "encryption-key"])
    assert first.exit_code == 0 and second.exit_code == 0, first.output
    assert Keyring.parse(first.stdout.strip()).sealing_key_id == "k2"
    assert first.stdout.strip() != second.stdout.strip()
    assert "INTERLOCK_ENCRYPTION_KEYS" in first.stderr
    bad = CliRunner().invoke(app, ["keys", "encryption-key", "--key-id", "no spaces"])
    assert bad.exit_code == 2 and bad.stdout == ""
