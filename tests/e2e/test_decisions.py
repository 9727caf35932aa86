"""Reviewer decisions end to end: generations, the race for one suspension, the reviewer record
and custom headers. Four service processes, real Kafka, FerretDB."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from tests.e2e.cluster import SERVICES, Cluster
from tests.e2e.conftest import Api, ledger_entries

pytestmark = pytest.mark.e2e


async def test_a_stale_generation_is_409_and_the_current_one_is_accepted(api: Api) -> None:
    suspended = await api.start_suspended()
    execution_id = suspended["execution_id"]
    assert suspended["generation"] == suspended["suspension_id"] == 1
    stale = await api.resume(execution_id, {"decision": "approve", "generation": 7})
    assert stale.status_code == 409 and stale.json()["type"].endswith("/stale-generation")
    assert "suspension 7" in stale.json()["detail"]
    assert (await api.status_of(execution_id))["status"] == "suspended"
    ok = await api.resume(execution_id, {"decision": "approve", "generation": 1})
    assert ok.status_code == 202 and ok.json()["generation"] == 1


async def test_fifty_concurrent_resumes_one_wins_the_rest_name_the_winner(api: Api) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    answers = [
        {"decision": "approve" if i % 2 else "reject", "reviewer_notes": f"#{i}"} for i in range(50)
    ]
    responses = await asyncio.gather(*(api.resume(execution_id, body) for body in answers))
    codes = sorted(r.status_code for r in responses)
    assert codes == [202] + [409] * 49, codes
    winner = next(r for r in responses if r.status_code == 202).json()
    losers = [r.json() for r in responses if r.status_code == 409]
    # A loser answered while the execution resumes is a conflict; one answered after the run
    # that followed the decision ended (it can be that quick) is "not suspended". Both name
    # the same winner.
    assert {p["type"].rsplit("/", 1)[1] for p in losers} <= {"decision-conflict", "not-suspended"}
    assert {p["winning_decision"]["decision"] for p in losers} == {winner["decision"]}
    assert len({p["winning_decision"]["decision_id"] for p in losers}) == 1
    done = await api.wait_for(execution_id, "completed", "error")
    assert [d["decision"] for d in done["decisions"]] == [winner["decision"]]


async def test_the_audit_trail_of_three_suspensions_records_each_reviewer(
    api: Api, cluster: Cluster
) -> None:
    suspended = await api.start_suspended("chain-approval", "3 approvals")
    execution_id = suspended["execution_id"]
    reviewers = [await cluster.key(api.project) for _ in range(3)]
    for stage, secret in enumerate(reviewers, start=1):
        response = await api.client.post(
            f"/api/v1/projects/{api.project}/executions/{execution_id}/resume",
            params={"workspace_id": api.workspace},
            json={"decision": "approve", "reviewer_notes": f"stage {stage} ok"},
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert response.status_code == 202, response.text
        if stage < 3:
            suspended = await api.wait_for_suspension(
                execution_id, after=suspended["suspension_id"]
            )
    done = await api.wait_for(execution_id, "completed", "error")
    key_ids = [secret.split("_")[1] for secret in reviewers]
    recorded = [(d["reviewer"], d["reviewer_notes"], d["suspension_id"]) for d in done["decisions"]]
    assert [(r.split(" ")[0], n, g) for r, n, g in recorded] == [
        (f"key:{key_ids[0]}", "stage 1 ok", 1),
        (f"key:{key_ids[1]}", "stage 2 ok", 2),
        (f"key:{key_ids[2]}", "stage 3 ok", 3),
    ]
    trail = (await api.audit(execution_id)).json()
    assert [d["reviewer"] for d in trail["decisions"]] == [r for r, _, _ in recorded]
    assert all(d["decided_at"] for d in trail["decisions"])
    audit = trail["items"]
    resumes = [a for a in audit if a["action"] == "transition" and a["to_status"] == "resuming"]
    assert [a["actor"] for a in resumes] == [r for r, _, _ in recorded]
    assert all(a["at"] for a in audit)
    statuses = [a["to_status"] for a in audit if a["action"] == "transition"]
    assert statuses.count("suspended") == 3 and statuses[-1] == "completed"


async def test_custom_headers_reach_the_agent_for_one_segment_and_are_never_stored_or_logged(
    api: Api, cluster: Cluster, mongodb_uri: str
) -> None:
    first_secret, second_secret = "first-SECRET-d41d8cd9", "second-SECRET-8f00b204"
    invoke = await api.client.post(
        f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke",
        json={"agent": "refund-approval", "message": "Refund claim CLM-4821"},
        headers={"X-Interlock-Custom-Authorization": first_secret},
    )
    execution_id = invoke.json()["execution_id"]
    await api.wait_for(execution_id, "suspended")
    resumed = await api.client.post(
        f"/api/v1/projects/{api.project}/executions/{execution_id}/resume",
        params={"workspace_id": api.workspace},
        json={"decision": "approve"},
        headers={"X-Interlock-Custom-Authorization": second_secret},
    )
    assert resumed.status_code == 202
    await api.wait_for(execution_id, "completed")
    [refund] = ledger_entries(cluster, execution_id)
    # The resumed segment saw the header sent with the resume, not the one sent with the invoke.
    assert refund["custom_headers"] == {"x-interlock-custom-authorization": second_secret}

    stored = await every_document(mongodb_uri, cluster.database)
    assert stored, "the search must see the execution's documents"
    for secret in (first_secret, second_secret):
        assert secret not in stored
        for service in SERVICES:
            assert secret not in cluster.log_tail(service, lines=100_000), service


async def every_document(uri: str, database: str) -> str:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri)
    try:
        db = client[database]
        texts = []
        for name in await db.list_collection_names():
            async for document in db[name].find():
                texts.append(repr(document))
        return "\n".join(texts)
    finally:
        await client.close()


async def test_cancel_a_suspended_execution_then_nothing_resumes_it(
    api: Api, cluster: Cluster
) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    url = f"/api/v1/projects/{api.project}/executions/{execution_id}/cancel"
    params = {"workspace_id": api.workspace}
    member = await cluster.key(api.project, "PROJECT_MEMBER")
    forbidden = await api.client.post(
        url, params=params, headers={"Authorization": f"Bearer {member}"}
    )
    assert forbidden.status_code == 403
    accepted = await api.client.post(url, params=params, json={"reason": "claim withdrawn"})
    assert accepted.status_code == 202, accepted.text
    done = await api.wait_for(execution_id, "cancelled")
    assert done["suspend_context"] is None
    assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 409
    finished = await api.client.post(url, params=params)
    assert finished.status_code == 409 and finished.json()["type"].endswith("/already-finished")
    audit = (await api.audit(execution_id)).json()["items"]
    last = audit[-1]
    assert (last["from_status"], last["to_status"], last["reason"]) == (
        "suspended",
        "cancelled",
        "claim withdrawn",
    )
    assert last["actor"].startswith("key:")
    assert ledger_entries(cluster, execution_id) == []
