"""Interlock driven by an outside system through its Kafka topics only.

The tests play a producer/consumer that knows nothing of Interlock's code: they publish
hand-written JSON to ``execution.requested`` and ``decision.submitted`` with plain aiokafka,
keyed by the execution id, and read ``execution.suspended``, ``execution.status`` and
``execution.dead_lettered``. HTTP is used only to read what the spec exposes there (the audit
trail, the list of executions).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import RecordMetadata
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api, ledger_entries

pytestmark = pytest.mark.e2e

PROJECT = "proj-topics"
WORKSPACE = "ws-topics"
CLAIM = "Refund claim CLM-4821"
WAIT = 45.0
"""Upper bound of any single wait; a whole test stays well under a minute when healthy."""

T = TypeVar("T")


# --- the outside system's view of Kafka ----------------------------------------------------------


@dataclass(frozen=True)
class Received:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: Any
    """The JSON body, or ``None`` when the body is not JSON."""


class Reader:
    """One consumer (its own group, from the earliest offset) that keeps what it has read."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self._consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            group_id=f"outside-system-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        self.received: list[Received] = []

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        await self._consumer.stop()

    def on(self, topic: str) -> list[Received]:
        return [r for r in self.received if r.topic == topic]

    async def wait_for(
        self, select: Callable[[Reader], T | None], *, what: str, timeout: float = WAIT
    ) -> T:
        """Read until ``select`` returns something truthy; fail at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            found = select(self)
            if found:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = [(r.topic, r.key, r.value) for r in self.received[-20:]]
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; last seen: {seen}"
                )
            batches = await self._consumer.getmany(timeout_ms=int(min(remaining, 0.5) * 1000) + 1)
            for records in batches.values():
                for record in records:
                    self.received.append(_received(record))


def _received(record: Any) -> Received:
    try:
        value = json.loads(record.value)
    except (TypeError, ValueError):
        value = None
    key = record.key.decode(errors="replace") if record.key is not None else None
    return Received(record.topic, record.partition, record.offset, key, value)


def signature_headers(name: str, private_key: str, body: bytes) -> list[tuple[str, bytes]]:
    """What a registered producer sends beside a decision, as docs/security.md describes it:
    Ed25519 over the fixed prefix and the exact body, base64url without padding."""
    seed = base64.urlsafe_b64decode(private_key + "=" * (-len(private_key) % 4))
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(
        b"interlock-signed-message/v1\n" + body
    )
    encoded = base64.urlsafe_b64encode(signature).rstrip(b"=")
    return [("interlock-signer", name.encode()), ("interlock-signature", encoded)]


class OutsideSystem:
    """Publishes raw bytes or hand-written JSON; opens readers. Topic names without the prefix.
    It is a registered producer (``name``, ``private_key``): it signs its decisions."""

    def __init__(self, bootstrap: str, prefix: str, name: str, private_key: str) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self._name = name
        self._private_key = private_key
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True
        )
        self._readers: list[Reader] = []

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        for reader in self._readers:
            await reader.stop()
        await self._producer.stop()

    async def publish(
        self,
        name: str,
        body: dict[str, Any] | list[Any] | bytes,
        *,
        key: str,
        partition: int | None = None,
        signed: bool = True,
    ) -> RecordMetadata:
        value = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = None
        if signed and name in ("decision.submitted", "execution.cancel_requested"):
            headers = signature_headers(self._name, self._private_key, value)
        return await self._producer.send_and_wait(
            self.topic(name), value=value, key=key.encode(), partition=partition, headers=headers
        )

    async def reader(self, *names: str) -> Reader:
        reader = Reader(self.bootstrap, [self.topic(n) for n in names])
        await reader.start()
        self._readers.append(reader)
        return reader


@pytest.fixture
async def outside(cluster: Cluster) -> AsyncIterator[OutsideSystem]:
    system = OutsideSystem(
        cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"],
        cluster.topic_prefix,
        "e2e-owner",
        cluster.producer_keys["e2e-owner"],
    )
    await system.start()
    try:
        yield system
    finally:
        await system.stop()


@pytest.fixture
async def http(cluster: Cluster) -> AsyncIterator[httpx.AsyncClient]:
    """Reads the audit trail over HTTP as an owner of the project the events name."""
    headers = {"Authorization": f"Bearer {await cluster.key(PROJECT)}"}
    async with httpx.AsyncClient(base_url=cluster.base_url, timeout=20, headers=headers) as client:
        yield client


# --- hand-written events --------------------------------------------------------------------------


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_execution_id() -> str:
    return str(uuid.uuid4())


def execution_requested(
    execution_id: str,
    *,
    workspace: str = WORKSPACE,
    agent: str = "refund-approval",
    message: str = CLAIM,
) -> dict[str, Any]:
    return {
        "type": "execution.requested",
        "version": 1,
        "event_id": str(uuid.uuid4()),
        "occurred_at": now(),
        "execution_id": execution_id,
        "project_id": PROJECT,
        "workspace_id": workspace,
        "agent": agent,
        "input": {"message": message},
    }


def decision_submitted(
    execution_id: str,
    decision: str,
    *,
    suspension_id: int | None = None,
    workspace: str = WORKSPACE,
    notes: str = "checked by the outside system",
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "decision.submitted",
        "version": 1,
        "event_id": str(uuid.uuid4()),
        "occurred_at": now(),
        "execution_id": execution_id,
        "project_id": PROJECT,
        "workspace_id": workspace,
        "decision_id": str(uuid.uuid4()),
        "decision": decision,
        "reviewer_notes": notes,
    }
    if suspension_id is not None:
        event["suspension_id"] = suspension_id
    return event


# --- selectors over what a reader has read -------------------------------------------------------


def suspension_of(outside: OutsideSystem, execution_id: str) -> Callable[[Reader], Any]:
    def select(reader: Reader) -> Any:
        for r in reader.on(outside.topic("execution.suspended")):
            if r.value and r.value.get("execution_id") == execution_id:
                return r.value
        return None

    return select


def statuses_of(reader: Reader, outside: OutsideSystem, execution_id: str) -> list[dict[str, Any]]:
    return [
        r.value
        for r in reader.on(outside.topic("execution.status"))
        if r.value and r.value.get("execution_id") == execution_id
    ]


def status_reached(
    outside: OutsideSystem, execution_id: str, *statuses: str
) -> Callable[[Reader], Any]:
    def select(reader: Reader) -> Any:
        for event in statuses_of(reader, outside, execution_id):
            if event.get("status") in statuses:
                return event
        return None

    return select


def finished_or_dead_lettered(outside: OutsideSystem, execution_id: str) -> Callable[[Reader], Any]:
    """The execution's terminal status, or the dead letter of a message keyed by it, if sooner."""
    finished = status_reached(outside, execution_id, "completed", "error")

    def select(reader: Reader) -> Any:
        for r in reader.on(outside.topic("execution.dead_lettered")):
            if r.value and r.value.get("key") == execution_id:
                return ("dead letter", r.value)
        event = finished(reader)
        return ("status", event) if event else None

    return select


def by_version(events: list[dict[str, Any]]) -> list[str]:
    """Status events de-duplicated by sequence (re-announcements repeat a sequence),
    in version order. A version never announces two different statuses."""
    seen: dict[int, str] = {}
    for event in events:
        version, status = event["sequence"], event["status"]
        assert seen.setdefault(version, status) == status, (version, status, seen)
    return [seen[v] for v in sorted(seen)]


def dead_letter_for(outside: OutsideSystem, sent: RecordMetadata) -> Callable[[Reader], Any]:
    """The dead letter of the message stored at ``sent`` (its topic, partition and offset)."""

    def select(reader: Reader) -> Any:
        for r in reader.on(outside.topic("execution.dead_lettered")):
            letter = r.value
            if (
                letter
                and letter.get("source_topic") == sent.topic
                and letter.get("partition") == sent.partition
                and letter.get("offset") == sent.offset
            ):
                return letter
        return None

    return select


async def consistently(
    probe: Callable[[], Awaitable[T]], check: Callable[[T], bool], *, duration: float, what: str
) -> None:
    """``check`` holds on every probe for ``duration`` seconds (a bounded watch, not a sleep)."""
    deadline = time.monotonic() + duration
    while True:
        value = await probe()
        assert check(value), f"{what} stopped holding: {value!r}"
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(0.1)  # poll interval of a bounded watch


EXPECTED_TRANSITIONS = [
    ("pending", "running"),
    ("running", "suspended"),
    ("suspended", "resuming"),
    ("resuming", "running"),
    ("running", "completed"),
]


# --- 1. the refund flow through topics -----------------------------------------------------------


async def test_refund_flow_driven_only_through_topics(
    outside: OutsideSystem, cluster: Cluster
) -> None:
    reader = await outside.reader(
        "execution.suspended", "execution.status", "execution.dead_lettered"
    )
    execution_id = new_execution_id()
    await outside.publish(
        "execution.requested", execution_requested(execution_id), key=execution_id
    )

    suspended = await reader.wait_for(
        suspension_of(outside, execution_id), what=f"{execution_id} on execution.suspended"
    )
    assert suspended["type"] == "execution.suspended" and suspended["version"] == 1
    assert suspended["project_id"] == PROJECT and suspended["workspace_id"] == WORKSPACE
    assert suspended["agent"] == "refund-approval"
    assert suspended["suspend_context"]["claim_id"] == "CLM-4821"
    assert (
        suspended["suspend_context"]["task_description"]
        == "Approve refund of $240 for order #98765"
    )
    assert suspended["allowed_decisions"] == ["approve", "reject"]
    assert ledger_entries(cluster, execution_id) == []

    decision = decision_submitted(
        execution_id, "approve", suspension_id=suspended["suspension_id"], notes="verified identity"
    )
    await outside.publish("decision.submitted", decision, key=execution_id)

    kind, done = await reader.wait_for(
        finished_or_dead_lettered(outside, execution_id),
        what=f"{execution_id} to finish on execution.status",
    )
    # A decision answering an execution.suspended event must be accepted, not dead-lettered.
    assert kind == "status", f"the decision was dead-lettered: {done['reason']}"
    assert done["status"] == "completed", done
    [refund] = ledger_entries(cluster, execution_id)
    assert refund["kind"] == "refund" and refund["amount"] == 240

    history = by_version(statuses_of(reader, outside, execution_id))
    if history and history[0] == "pending":
        history = history[1:]
    assert history == ["running", "suspended", "resuming", "running", "completed"]


# --- 2. invalid events are dead-lettered, valid ones keep flowing --------------------------------


async def test_invalid_events_are_dead_lettered_and_do_not_block(
    outside: OutsideSystem, http: httpx.AsyncClient
) -> None:
    reader = await outside.reader(
        "execution.suspended", "execution.status", "execution.dead_lettered"
    )
    api = Api(http, PROJECT, WORKSPACE)
    requested, decisions = "execution.requested", "decision.submitted"
    # Everything on one partition of each topic, so a stuck bad message would block what follows.
    partition = 0

    first, second = new_execution_id(), new_execution_id()
    bad_ids = [new_execution_id() for _ in range(5)]
    versioned = {**execution_requested(bad_ids[2]), "version": 99}
    agentless = execution_requested(bad_ids[3])
    del agentless["agent"]
    bad_requests = [
        (b"this is not json {", "not valid JSON"),
        ([{"type": "execution.requested"}], "must be a JSON object"),
        (versioned, "unsupported version 99"),
        (agentless, "agent: Field required"),
        (execution_requested(bad_ids[4], agent="no-such-agent"), "unknown agent 'no-such-agent'"),
    ]
    sent: list[tuple[RecordMetadata, str, str, Any]] = []
    for index, ((body, reason), key) in enumerate(zip(bad_requests, bad_ids, strict=True)):
        meta = await outside.publish(requested, body, key=key, partition=partition)
        sent.append((meta, key, reason, body))
        if index == 1:  # a valid request between the bad ones ...
            await outside.publish(
                requested, execution_requested(first), key=first, partition=partition
            )
    # ... and one after all of them.
    await outside.publish(requested, execution_requested(second), key=second, partition=partition)

    for execution_id in (first, second):
        suspended = await reader.wait_for(
            suspension_of(outside, execution_id), what=f"{execution_id} on execution.suspended"
        )
        assert suspended["allowed_decisions"] == ["approve", "reject"]
        # Decide only once the orchestrator has stored the suspension (see test 1 for the race).
        await reader.wait_for(
            status_reached(outside, execution_id, "suspended"),
            what=f"{execution_id} to be suspended",
        )

    # Bring ``first`` to completed, so a later decision finds it no longer suspended.
    await outside.publish(decisions, decision_submitted(first, "approve"), key=first)
    done = await reader.wait_for(
        status_reached(outside, first, "completed", "error"), what=f"{first} to finish"
    )
    assert done["status"] == "completed", done

    unknown = new_execution_id()
    bad_decisions = [
        (decision_submitted(unknown, "approve"), unknown, f"unknown execution {unknown}"),
        (decision_submitted(second, "maybe"), second, "allowed decisions: approve, reject"),
        (decision_submitted(first, "approve"), first, "execution is completed, not suspended"),
    ]
    for body, key, reason in bad_decisions:
        meta = await outside.publish(decisions, body, key=key, partition=partition)
        sent.append((meta, key, reason, body))
    # A valid decision behind the bad ones on the same partition still gets through.
    await outside.publish(
        decisions, decision_submitted(second, "reject"), key=second, partition=partition
    )
    done = await reader.wait_for(
        status_reached(outside, second, "completed", "error"), what=f"{second} to finish"
    )
    assert done["status"] == "completed", done

    for meta, key, reason, body in sent:
        letter = await reader.wait_for(
            dead_letter_for(outside, meta),
            what=f"the dead letter of {meta.topic}[{meta.partition}]@{meta.offset} ({reason})",
        )
        assert letter["source_topic"] == meta.topic
        assert reason in letter["reason"], (reason, letter)
        assert letter["key"] == key
        assert letter["consumer"] and letter["error_type"]
        expected_payload = body.decode() if isinstance(body, bytes) else json.dumps(body)
        assert letter["payload"] == expected_payload

    # Nothing else was dead-lettered: the valid requests and decisions went through.
    ours = {first, second, unknown, *bad_ids}
    letters = {
        (r.value["source_topic"], r.value["partition"], r.value["offset"])
        for r in reader.on(outside.topic("execution.dead_lettered"))
        if r.value and r.value.get("key") in ours
    }
    assert letters == {(meta.topic, meta.partition, meta.offset) for meta, *_ in sent}

    # The decision that was not allowed is in the audit trail of the execution it addressed.
    audit = await api.audit(second)
    assert audit.status_code == 200, audit.text
    rejected = [a for a in audit.json()["items"] if a["action"] == "decision.rejected"]
    assert len(rejected) == 1, rejected
    assert "maybe" in rejected[0]["reason"] and "approve, reject" in rejected[0]["reason"]


# --- 3. redelivered events change nothing --------------------------------------------------------


async def test_redelivered_request_and_decision_act_once(
    outside: OutsideSystem, cluster: Cluster, http: httpx.AsyncClient
) -> None:
    workspace = "ws-topics-redelivery"
    api = Api(http, PROJECT, workspace)
    reader = await outside.reader(
        "execution.suspended", "execution.status", "execution.dead_lettered"
    )
    execution_id = new_execution_id()

    request = execution_requested(execution_id, workspace=workspace)
    for _ in range(2):
        await outside.publish("execution.requested", request, key=execution_id)
    suspended = await reader.wait_for(
        suspension_of(outside, execution_id), what=f"{execution_id} on execution.suspended"
    )
    # Decide only once the orchestrator has stored the suspension (see test 1 for the race).
    await reader.wait_for(
        status_reached(outside, execution_id, "suspended"), what=f"{execution_id} to be suspended"
    )

    def caused_by(event_id: str, count: int) -> Callable[[Reader], Any]:
        def select(r: Reader) -> Any:
            events = [
                e
                for e in statuses_of(r, outside, execution_id)
                if e.get("causation_id") == event_id
            ]
            return events if len(events) >= count else None

        return select

    # Both copies of the request were handled (each announces the status it caused or found).
    await reader.wait_for(
        caused_by(request["event_id"], 2), what="both copies of the request handled"
    )

    decision = decision_submitted(
        execution_id, "approve", suspension_id=suspended["suspension_id"], workspace=workspace
    )
    for _ in range(2):
        await outside.publish("decision.submitted", decision, key=execution_id)
    done = await reader.wait_for(
        status_reached(outside, execution_id, "completed", "error"),
        what=f"{execution_id} to finish",
    )
    assert done["status"] == "completed", done
    await reader.wait_for(
        caused_by(decision["event_id"], 2), what="both copies of the decision handled"
    )

    # A re-sent resume may still be on its way to the sandbox: the ledger must stay at one refund.
    async def ledger() -> list[dict[str, Any]]:
        return ledger_entries(cluster, execution_id)

    await consistently(
        ledger,
        lambda entries: [(e["kind"], e.get("amount")) for e in entries] == [("refund", 240)],
        duration=3,
        what="exactly one refund in the ledger",
    )

    page = await http.get(
        f"/api/v1/projects/{PROJECT}/executions", params={"workspace_id": workspace, "limit": 200}
    )
    assert page.status_code == 200, page.text
    assert [item["execution_id"] for item in page.json()["items"]] == [execution_id]

    execution = await api.status_of(execution_id)
    assert [d["decision"] for d in execution["decisions"]] == ["approve"]

    audit = (await api.audit(execution_id)).json()["items"]
    transitions = [(a["from_status"], a["to_status"]) for a in audit if a["action"] == "transition"]
    assert transitions == EXPECTED_TRANSITIONS
    assert [a["action"] for a in audit].count("dispatched") == 1
    assert not [a for a in audit if a["action"] == "decision.rejected"]

    letters = [
        r.value
        for r in reader.on(outside.topic("execution.dead_lettered"))
        if r.value and r.value.get("key") == execution_id
    ]
    assert letters == []


# --- 4. answering execution.suspended at once ----------------------------------------------------


async def test_decision_sent_as_soon_as_suspended_is_seen_is_accepted(
    outside: OutsideSystem,
) -> None:
    """An outside reviewer that answers each execution.suspended event at once (the topic's
    designed use: docs/asyncapi.yaml, external:receive:execution.suspended) must have its decision
    applied, never dead-lettered as 'not suspended'."""
    reader = await outside.reader(
        "execution.suspended", "execution.status", "execution.dead_lettered"
    )
    ids = [new_execution_id() for _ in range(8)]
    for execution_id in ids:
        await outside.publish(
            "execution.requested", execution_requested(execution_id), key=execution_id
        )

    answered: set[str] = set()

    def unanswered(r: Reader) -> list[dict[str, Any]]:
        return [
            e.value
            for e in r.on(outside.topic("execution.suspended"))
            if e.value
            and e.value.get("execution_id") in ids
            and e.value["execution_id"] not in answered
        ]

    while len(answered) < len(ids):
        for suspended in await reader.wait_for(unanswered, what="the next suspensions"):
            execution_id = suspended["execution_id"]
            if execution_id in answered:  # a re-reported suspension: answered already
                continue
            decision = decision_submitted(
                execution_id, "approve", suspension_id=suspended["suspension_id"]
            )
            await outside.publish("decision.submitted", decision, key=execution_id)
            answered.add(execution_id)

    for execution_id in ids:
        kind, done = await reader.wait_for(
            finished_or_dead_lettered(outside, execution_id), what=f"{execution_id} to finish"
        )
        assert kind == "status", (
            f"the decision on {execution_id} was dead-lettered: {done['reason']}"
        )
        assert done["status"] == "completed", done
