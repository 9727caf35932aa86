"""The refund agent end to end over HTTP: four service processes, real Kafka, FerretDB."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import Api, ledger_entries

pytestmark = pytest.mark.e2e


async def test_invoke_suspend_approve_complete(api: Api, cluster: Cluster) -> None:
    response = await api.invoke()
    assert response.status_code == 202
    accepted = response.json()
    execution_id = accepted["execution_id"]
    assert accepted["status"] == "pending"

    # A GET right after the 202 finds the execution.
    first = await api.get(execution_id)
    assert first.status_code == 200
    assert first.json()["status"] in {"pending", "running", "suspended"}

    suspended = await api.wait_for(execution_id, "suspended")
    assert suspended["suspend_context"]["claim_id"] == "CLM-4821"
    assert (
        suspended["suspend_context"]["task_description"]
        == "Approve refund of $240 for order #98765"
    )
    assert suspended["allowed_decisions"] == ["approve", "reject"]
    assert suspended["suspended_at"] is not None
    assert ledger_entries(cluster, execution_id) == []

    resumed = await api.resume(
        execution_id, {"decision": "APPROVE", "reviewer_notes": "verified identity"}
    )
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["decision"] == "approve"

    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed"
    assert done["result"]["outcome"] == "refunded"
    [refund] = ledger_entries(cluster, execution_id)
    assert refund["kind"] == "refund" and refund["amount"] == 240
    assert done["decisions"][0]["decision"] == "approve"
    assert done["decisions"][0]["reviewer_notes"] == "verified identity"

    audit = (await api.audit(execution_id)).json()["items"]
    transitions = [(a["from_status"], a["to_status"]) for a in audit if a["action"] == "transition"]
    assert transitions == [
        ("pending", "running"),
        ("running", "suspended"),
        ("suspended", "resuming"),
        ("resuming", "running"),
        ("running", "completed"),
    ]


async def test_reject_records_the_notes_and_refunds_nothing(api: Api, cluster: Cluster) -> None:
    suspended = await api.start_suspended()
    execution_id = suspended["execution_id"]
    response = await api.resume(
        execution_id, {"decision": "reject", "reviewer_notes": "duplicate claim"}
    )
    assert response.status_code == 202
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed" and done["result"]["outcome"] == "rejected"
    assert ledger_entries(cluster, execution_id) == [
        {
            "kind": "rejection",
            "execution_id": execution_id,
            "claim_id": "CLM-4821",
            "reviewer_notes": "duplicate claim",
            "custom_headers": {},
        }
    ]


async def test_one_execution_suspends_and_resumes_many_times(api: Api, cluster: Cluster) -> None:
    suspended = await api.start_suspended("chain-approval", "needs 3 approvals")
    execution_id = suspended["execution_id"]
    for stage in (1, 2, 3):
        assert suspended["suspend_context"]["stage"] == stage
        response = await api.resume(execution_id, {"decision": "approve"})
        assert response.status_code == 202, response.text
        if stage < 3:
            suspended = await api.wait_for_suspension(
                execution_id, after=suspended["suspension_id"]
            )
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed"
    assert done["result"]["decisions"] == ["approve", "approve", "approve"]
    stages = [e["stage"] for e in ledger_entries(cluster, execution_id)]
    assert stages == [1, 2, 3]


async def test_agent_failure_ends_in_error_with_the_error_recorded(api: Api) -> None:
    response = await api.invoke(message="Refund claim CLM-0000")
    done = await api.wait_for(response.json()["execution_id"], "completed", "error")
    assert done["status"] == "error"
    assert done["error"] == {
        "error_type": "ClaimNotFound",
        "message": "claim CLM-0000 does not exist",
    }


async def test_idempotency_key_returns_the_same_execution(api: Api) -> None:
    first = await api.invoke(idempotency_key="order-98765-refund")
    second = await api.invoke(idempotency_key="order-98765-refund")
    assert first.status_code == second.status_code == 202
    assert first.json()["execution_id"] == second.json()["execution_id"]
    different = await api.invoke(
        message="Refund claim CLM-1002", idempotency_key="order-98765-refund"
    )
    assert different.status_code == 409
    assert different.headers["content-type"] == "application/problem+json"
    await api.wait_for(first.json()["execution_id"], "suspended")


async def test_concurrent_decisions_have_exactly_one_winner(api: Api) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    responses = await asyncio.gather(
        *(
            api.resume(execution_id, {"decision": d})
            for d in ("approve", "reject", "approve", "reject")
        )
    )
    codes = sorted(r.status_code for r in responses)
    assert codes == [202, 409, 409, 409], [r.text for r in responses]
    done = await api.wait_for(execution_id, "completed", "error")
    winner = next(r for r in responses if r.status_code == 202).json()["decision"]
    assert [d["decision"] for d in done["decisions"]] == [winner]


async def test_pending_reviews_are_listed_and_paged(api: Api) -> None:
    ids = {(await api.start_suspended())["execution_id"] for _ in range(3)}
    seen: list[str] = []
    cursor = None
    while True:
        params = {"workspace_id": api.workspace, "status": "suspended", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await api.client.get(f"/api/v1/projects/{api.project}/executions", params=params)
        assert page.status_code == 200
        body = page.json()
        assert all(item["status"] == "suspended" for item in body["items"])
        seen.extend(item["execution_id"] for item in body["items"])
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert ids <= set(seen)
    assert len(seen) == len(set(seen))


async def test_agents_are_listed(api: Api) -> None:
    response = await api.client.get(
        f"/api/v1/projects/{api.project}/agents", params={"workspace_id": api.workspace}
    )
    names = {a["name"]: a["description"] for a in response.json()["items"]}
    assert names.get("refund-approval")


async def test_restart_of_all_services_while_suspended_loses_nothing(
    api: Api, cluster: Cluster
) -> None:
    ids = [(await api.start_suspended())["execution_id"] for _ in range(3)]
    cluster.stop()
    cluster.start()
    await cluster.wait_ready()
    for execution_id in ids:
        assert (await api.status_of(execution_id))["status"] == "suspended"
        response = await api.resume(execution_id, {"decision": "approve"})
        assert response.status_code == 202, response.text
    for execution_id in ids:
        done = await api.wait_for(execution_id, "completed", "error")
        assert done["status"] == "completed"
        assert [e["kind"] for e in ledger_entries(cluster, execution_id)] == ["refund"]


async def test_sigkill_of_all_services_while_suspended_loses_nothing(
    api: Api, cluster: Cluster
) -> None:
    execution_id = (await api.start_suspended("chain-approval", "2 approvals"))["execution_id"]
    cluster.stop(sig=signal.SIGKILL)
    cluster.start()
    await cluster.wait_ready()
    assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 202
    await api.wait_for_suspension(execution_id, after=1)
    assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 202
    done = await api.wait_for(execution_id, "completed", "error")
    assert done["status"] == "completed"
    assert [e["stage"] for e in ledger_entries(cluster, execution_id)] == [1, 2]
