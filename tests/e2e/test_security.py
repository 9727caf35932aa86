"""Authentication, roles, tenant isolation and input limits, against the gateway process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient

from tests.e2e.cluster import REPO, SERVICES, Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE, Api
from tests.eventually import eventually
from tests.ports import free_port

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


def problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = dict(response.json())
    assert body["type"].endswith("/" + slug), body
    return body


def as_key(api: Api, secret: str | None) -> Api:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    client = httpx.AsyncClient(base_url=str(api.client.base_url), timeout=20, headers=headers)
    return Api(client, api.project, api.workspace)


async def test_no_bad_or_revoked_key_is_401_with_www_authenticate(
    api: Api, cluster: Cluster
) -> None:
    for secret in (None, "not-a-key", "ilk_0123456789abcdef_forged-secret-value-000000000"):
        caller = as_key(api, secret)
        response = await caller.invoke()
        body = problem(response, 401, "unauthenticated")
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "key" in body["detail"]
        await caller.client.aclose()
    secret = await cluster.key(PROJECT, "PROJECT_MEMBER")
    member = as_key(api, secret)
    assert (await member.invoke()).status_code == 202
    key_id = secret.split("_")[1]
    revoked = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "interlock.cli", "keys", "revoke", key_id, "--project", PROJECT],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert revoked.returncode == 0, revoked.stderr
    problem(await member.invoke(), 401, "unauthenticated")
    await member.client.aclose()


async def test_a_key_sent_as_x_api_key_runs_a_review_like_a_bearer_key(
    api: Api, cluster: Cluster
) -> None:
    """The header LangGraph's client sends: the same key, the same roles, the same 401."""
    owner_secret = await cluster.key(PROJECT, "PROJECT_OWNER")
    reader_secret = await cluster.key(PROJECT, "PROJECT_READ_ONLY")

    def keyed(secret: str) -> Api:
        client = httpx.AsyncClient(
            base_url=str(api.client.base_url), timeout=20, headers={"X-API-Key": secret}
        )
        return Api(client, api.project, api.workspace)

    owner, reader, forged = (
        keyed(owner_secret),
        keyed(reader_secret),
        keyed("ilk_0123456789abcdef_forged-secret-value-000000000"),
    )
    try:
        execution_id = (await owner.start_suspended())["execution_id"]
        assert (await reader.get(execution_id)).json()["status"] == "suspended"
        problem(await reader.resume(execution_id, {"decision": "approve"}), 403, "forbidden-role")
        assert (await owner.resume(execution_id, {"decision": "approve"})).status_code == 202
        await owner.wait_for(execution_id, "completed")
        response = await forged.get(execution_id)
        problem(response, 401, "unauthenticated")
        assert response.headers["www-authenticate"].startswith("Bearer")
    finally:
        for caller in (owner, reader, forged):
            await caller.client.aclose()


async def test_each_endpoint_demands_its_role(api: Api, cluster: Cluster) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    reader = as_key(api, await cluster.key(PROJECT, "PROJECT_READ_ONLY"))
    member = as_key(api, await cluster.key(PROJECT, "PROJECT_MEMBER"))
    try:
        assert (await reader.get(execution_id)).status_code == 200
        assert (await reader.audit(execution_id)).status_code == 200
        body = problem(await reader.invoke(), 403, "forbidden-role")
        assert "invoke requires PROJECT_OWNER or PROJECT_MEMBER" in body["detail"]
        for caller in (reader, member):
            body = problem(
                await caller.resume(execution_id, {"decision": "approve"}), 403, "forbidden-role"
            )
            assert "resume requires PROJECT_OWNER" in body["detail"]
            assert body["required_roles"] == ["PROJECT_OWNER"]
        assert (await member.invoke()).status_code == 202
        assert (await api.status_of(execution_id))["status"] == "suspended"
        assert (await api.resume(execution_id, {"decision": "approve"})).status_code == 202
        done = await api.wait_for(execution_id, "completed")
        assert done["decisions"][0]["reviewer"].startswith("key:")
    finally:
        await reader.client.aclose()
        await member.client.aclose()


async def test_other_projects_and_workspaces_look_exactly_like_missing_executions(
    api: Api, cluster: Cluster
) -> None:
    execution_id = (await api.start_suspended())["execution_id"]
    stranger = as_key(api, await cluster.key("another-project"))
    confined = as_key(api, await cluster.key(PROJECT, workspaces=["ws-elsewhere"]))
    try:
        missing = await api.get("no-such-execution")
        expected = {k: v for k, v in missing.json().items() if k != "instance"}
        for caller in (stranger, confined):
            for response in (
                await caller.get(execution_id),
                await caller.resume(execution_id, {"decision": "approve"}),
                await caller.audit(execution_id),
            ):
                body = problem(response, 404, "execution-not-found")
                shown = {k: v for k, v in body.items() if k != "instance"}
                assert shown == {**expected, "detail": f"no execution {execution_id} here"}
        problem(await confined.invoke(), 404, "not-found")
        assert (await api.status_of(execution_id))["status"] == "suspended"
    finally:
        await stranger.client.aclose()
        await confined.client.aclose()


async def test_input_limits(api: Api) -> None:
    url = f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke"
    problem(
        await api.client.post(
            url,
            content=b"{" + b" " * (2 << 20) + b"}",
            headers={"content-type": "application/json"},
        ),
        413,
        "payload-too-large",
    )
    deep = "[" * 100 + "]" * 100
    problem(
        await api.client.post(
            url,
            content=f'{{"agent": "refund-approval", "message": "x", "n": {deep}}}'.encode(),
            headers={"content-type": "application/json"},
        ),
        400,
        "json-too-deep",
    )
    body = problem(
        await api.client.post(
            url, json={"agent": "refund-approval", "message": "x", "role": "admin"}
        ),
        400,
        "invalid-request",
    )
    assert "role" in body["detail"]
    for hostile in ("$where", "a.b.c", '{"$gt": ""}', "..%2F..%2Fadmin", "x" * 200):
        for response in (
            await api.get(hostile),
            await api.resume(hostile, {"decision": "approve"}),
        ):
            assert response.status_code in (400, 404), (hostile, response.text)
            assert response.headers["content-type"] == PROBLEM
    injected = await api.client.post(url, json={"agent": {"$ne": None}, "message": {"$gt": ""}})
    problem(injected, 400, "invalid-request")
    pages = await api.client.get(
        f"/api/v1/projects/{api.project}/executions",
        params={"workspace_id": api.workspace, "limit": 10_000},
    )
    problem(pages, 400, "invalid-request")


@pytest.fixture
async def strict_gateway(cluster: Cluster) -> AsyncIterator[str]:
    """A second gateway process on the same cluster with a small rate limit."""
    port = free_port()
    env = {
        **cluster.env,
        "INTERLOCK_PORT": str(port),
        "INTERLOCK_RATE_LIMIT_PER_SECOND": "1",
        "INTERLOCK_RATE_LIMIT_BURST": "5",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "interlock.cli",
        "service",
        "gateway",
        env=env,
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    async def ready() -> bool:
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"{url}/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await eventually(ready, bool, timeout=30, what="the strict gateway")
        yield url
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=20)


async def test_rate_limit_per_key_is_429_with_retry_after(
    api: Api, cluster: Cluster, strict_gateway: str
) -> None:
    secret = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=strict_gateway, headers=headers) as client:
        url = f"/api/v1/projects/{PROJECT}/agents"
        codes = [
            (await client.get(url, params={"workspace_id": WORKSPACE})).status_code
            for _ in range(8)
        ]
        assert codes[:5] == [200] * 5 and 429 in codes[5:], codes
        limited = await client.get(url, params={"workspace_id": WORKSPACE})
        problem(limited, 429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1
        other = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
        fresh = await client.get(
            url, params={"workspace_id": WORKSPACE}, headers={"Authorization": f"Bearer {other}"}
        )
        assert fresh.status_code == 200  # another key has its own bucket


async def test_key_secrets_are_never_logged_or_stored(
    api: Api, cluster: Cluster, mongodb_uri: str
) -> None:
    secret = await cluster.key(PROJECT, "PROJECT_OWNER")
    owner = as_key(api, secret)
    try:
        execution_id = (await owner.start_suspended())["execution_id"]
        assert (await owner.resume(execution_id, {"decision": "approve"})).status_code == 202
        await owner.wait_for(execution_id, "completed")
    finally:
        await owner.client.aclose()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_uri)
    try:
        db = client[cluster.database]
        stored = [
            json.dumps(document, default=str)
            for name in await db.list_collection_names()
            async for document in db[name].find()
        ]
    finally:
        await client.close()
    assert any("api_keys" in s or "secret_hash" in s for s in stored)
    token = secret.split("_", 2)[2]
    for text in (*stored, *(cluster.log_tail(service, lines=100_000) for service in SERVICES)):
        assert token not in text


async def test_separation_of_duties_no_self_approval_and_two_owners(
    api: Api, cluster: Cluster
) -> None:
    requester, first, second = [as_key(api, await cluster.key(PROJECT)) for _ in range(3)]
    try:
        execution_id = (await requester.start_suspended("high-value-refund"))["execution_id"]
        own = await requester.resume(execution_id, {"decision": "approve"})
        assert "another owner" in problem(own, 403, "self-approval")["detail"]

        partial = await first.resume(execution_id, {"decision": "approve", "reviewer_notes": "ok"})
        assert partial.status_code == 202, partial.text
        body = partial.json()
        assert (body["status"], len(body["approvals"]), body["approvals_required"]) == (
            "awaiting_approvals",
            1,
            2,
        )
        again = await first.resume(execution_id, {"decision": "approve"})
        assert len(again.json()["approvals"]) == 1  # the same owner counts once
        shown = await api.status_of(execution_id)
        assert shown["status"] == "suspended" and len(shown["approvals"]) == 1
        trail = (await api.audit(execution_id)).json()
        assert [a["decision"] for a in trail["approvals"]] == ["approve"]

        final = await second.resume(execution_id, {"decision": "approve"})
        assert final.status_code == 202 and final.json()["status"] == "accepted"
        done = await api.wait_for(execution_id, "completed")
        [decision] = done["decisions"]
        assert len(decision["approvers"]) == 2 and len(set(decision["approvers"])) == 2

        rejected = (await requester.start_suspended("high-value-refund"))["execution_id"]
        answer = await first.resume(rejected, {"decision": "reject", "reviewer_notes": "no"})
        assert answer.json()["status"] == "accepted"  # one rejection acts at once
        assert (await api.wait_for(rejected, "completed"))["result"]["outcome"] == "rejected"
    finally:
        for caller in (requester, first, second):
            await caller.client.aclose()
