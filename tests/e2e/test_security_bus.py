"""The bus as a channel, attacked as the security probe did (issue 31): a decision published
straight to ``decision.submitted`` obeys the rules an API key's answer obeys. On the four
services as separate processes over real Kafka and the MongoDB-compatible store.

- The requester of a ``high-value-refund`` (two owners other than the requester) is refused by
  the API; the same approval forged on the topic, naming two other owners and the gateway's
  claim, pays nothing and is audited as unauthenticated.
- A registered producer whose role may not decide is refused, under its own name.
- A registered owner producer is one approver: the refund waits for a second person, and the
  audit names the producer, not what its message claimed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api, ledger_entries
from tests.e2e.test_topic_interface import (
    OutsideSystem,
    Reader,
    dead_letter_for,
    decision_submitted,
)
from tests.eventually import eventually

pytestmark = pytest.mark.e2e

PROJECT, WORKSPACE = "proj-bus", "ws-bus"
CFO, CEO = "person:cfo@example.com", "person:ceo@example.com"


async def api_of(cluster: Cluster, email: str) -> Api:
    key = await cluster.key(PROJECT, email=email)
    client = httpx.AsyncClient(
        base_url=cluster.base_url, timeout=20, headers={"Authorization": f"Bearer {key}"}
    )
    return Api(client, project=PROJECT, workspace=WORKSPACE)


@pytest.fixture
async def people(cluster: Cluster) -> AsyncIterator[dict[str, Api]]:
    apis = {who: await api_of(cluster, f"{who}@example.com") for who in ("requester", "owner")}
    try:
        yield apis
    finally:
        for api in apis.values():
            await api.client.aclose()


@pytest.fixture
async def producers(cluster: Cluster) -> AsyncIterator[dict[str, OutsideSystem]]:
    bootstrap = cluster.env["INTERLOCK_KAFKA_BOOTSTRAP_SERVERS"]
    systems = {
        name: OutsideSystem(bootstrap, cluster.topic_prefix, name, cluster.producer_keys[name])
        for name in ("e2e-owner", "e2e-member")
    }
    for system in systems.values():
        await system.start()
    try:
        yield systems
    finally:
        for system in systems.values():
            await system.stop()


def forged(execution_id: str, suspension_id: int) -> dict[str, Any]:
    """The probe's message: an approval in two owners' names, with the gateway's claim."""
    return {
        **decision_submitted(
            execution_id, "approve", suspension_id=suspension_id, workspace=WORKSPACE
        ),
        "project_id": PROJECT,
        "reviewer": CFO,
        "approvers": [CFO, CEO],
        "claimed": True,
    }


async def audit_with(api: Api, execution_id: str, action: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        response = await api.audit(execution_id)
        assert response.status_code == 200, response.text
        return [a for a in response.json()["items"] if a["action"] == action]

    return await eventually(read, bool, timeout=30, what=f"{action} in {execution_id}'s audit")


async def suspended_refund(requester: Api) -> dict[str, Any]:
    response = await requester.invoke("high-value-refund", "Refund claim CLM-4821")
    assert response.status_code == 202, response.text
    return await requester.wait_for(response.json()["execution_id"], "suspended")


async def test_a_forged_approval_on_the_topic_pays_nothing_and_is_audited(
    cluster: Cluster, people: dict[str, Api], producers: dict[str, OutsideSystem]
) -> None:
    requester = people["requester"]
    waiting = await suspended_refund(requester)
    execution_id, suspension_id = waiting["execution_id"], waiting["suspension_id"]
    refused = await requester.resume(execution_id, {"decision": "approve"})
    assert refused.status_code == 403, refused.text  # the API says no to the requester

    attacker = producers["e2e-owner"]  # any client of the broker: it just does not sign
    reader: Reader = await attacker.reader("execution.dead_lettered")
    meta = await attacker.publish(
        "decision.submitted", forged(execution_id, suspension_id), key=execution_id, signed=False
    )
    letter = await reader.wait_for(dead_letter_for(attacker, meta), what="the forged decision")
    assert "not signed" in letter["reason"]
    [entry] = await audit_with(requester, execution_id, "decision.unauthenticated")
    assert entry["actor"] == "unverified sender" and CFO in entry["reason"]
    after = await requester.status_of(execution_id)
    assert after["status"] == "suspended" and after["decisions"] == []
    assert ledger_entries(cluster, execution_id) == []
    # It took no claim: a real owner's approval still counts (one of the two needed).
    first = await people["owner"].resume(execution_id, {"decision": "approve"})
    assert first.status_code == 202, first.text
    accepted = first.json()
    assert accepted["status"] == "awaiting_approvals" and accepted["approvals_required"] == 2
    assert len(accepted["approvals"]) == 1


async def test_a_producer_without_a_deciding_role_is_refused_under_its_own_name(
    people: dict[str, Api], producers: dict[str, OutsideSystem]
) -> None:
    requester = people["requester"]
    waiting = await suspended_refund(requester)
    execution_id, suspension_id = waiting["execution_id"], waiting["suspension_id"]
    await producers["e2e-member"].publish(
        "decision.submitted", forged(execution_id, suspension_id), key=execution_id
    )
    [entry] = await audit_with(requester, execution_id, "decision.refused")
    assert entry["actor"] == "producer:e2e-member"
    assert "PROJECT_MEMBER" in entry["reason"] and "PROJECT_OWNER" in entry["reason"]
    assert (await requester.status_of(execution_id))["status"] == "suspended"


async def test_a_registered_owner_producer_is_one_approver_under_its_own_identity(
    cluster: Cluster, people: dict[str, Api], producers: dict[str, OutsideSystem]
) -> None:
    requester = people["requester"]
    waiting = await suspended_refund(requester)
    execution_id, suspension_id = waiting["execution_id"], waiting["suspension_id"]
    await producers["e2e-owner"].publish(
        "decision.submitted", forged(execution_id, suspension_id), key=execution_id
    )

    async def approvals() -> list[dict[str, Any]]:
        return list((await requester.status_of(execution_id))["approvals"])

    [counted] = await eventually(approvals, bool, timeout=30, what="the producer's approval")
    assert counted["reviewer"] == "producer:e2e-owner"
    assert (await requester.status_of(execution_id))["status"] == "suspended"
    assert ledger_entries(cluster, execution_id) == []
    # A person's approval through the API completes the two.
    second = await people["owner"].resume(execution_id, {"decision": "approve"})
    assert second.status_code == 202, second.text
    done = await requester.wait_for(execution_id, "completed")
    [decision] = done["decisions"]
    assert decision["approvers"][0] == "producer:e2e-owner"
    assert CFO not in str(decision) and len(ledger_entries(cluster, execution_id)) == 1


async def test_a_forged_cancellation_stops_nothing(
    people: dict[str, Api], producers: dict[str, OutsideSystem]
) -> None:
    requester = people["requester"]
    waiting = await suspended_refund(requester)
    execution_id = waiting["execution_id"]
    cancel = {
        "type": "execution.cancel_requested",
        "version": 1,
        "event_id": str(uuid.uuid4()),
        "execution_id": execution_id,
        "project_id": PROJECT,
        "workspace_id": WORKSPACE,
        "requested_by": "the CFO",
    }
    system = producers["e2e-owner"]
    await system.publish("execution.cancel_requested", cancel, key=execution_id, signed=False)
    [entry] = await audit_with(requester, execution_id, "cancel.unauthenticated")
    assert entry["actor"] == "unverified sender" and "the CFO" in entry["reason"]
    assert (await requester.status_of(execution_id))["status"] == "suspended"
    # Signed by the registered owner producer, it cancels, under the producer's name.
    signed = {**cancel, "event_id": str(uuid.uuid4())}
    await system.publish("execution.cancel_requested", signed, key=execution_id)
    done = await requester.wait_for(execution_id, "cancelled")
    assert done["status"] == "cancelled"
    cancelled = await audit_with(requester, execution_id, "transition")
    assert cancelled[-1]["actor"] == "producer:e2e-owner"
