"""Every bad request gets a specific RFC 9457 problem with the right 4xx, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


def assert_problem(
    response: httpx.Response, status: int, slug: str | None = None
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = dict(response.json())
    assert body["status"] == status and body["title"] and body["detail"]
    if slug is not None:
        assert body["type"].endswith("/" + slug), body
    return body


@pytest.fixture
async def suspended_id(api: Api) -> str:
    return str((await api.start_suspended())["execution_id"])


async def test_decision_not_in_allowed_list_is_400_listing_the_allowed_values(
    api: Api, suspended_id: str
) -> None:
    body = assert_problem(
        await api.resume(suspended_id, {"decision": "escalate"}), 400, "decision-not-allowed"
    )
    assert "approve, reject" in body["detail"]
    assert body["allowed_decisions"] == ["approve", "reject"]
    assert (await api.status_of(suspended_id))["status"] == "suspended"


async def test_decision_nested_in_human_review_is_400(api: Api, suspended_id: str) -> None:
    response = await api.resume(suspended_id, {"human_review": {"decision": "approve"}})
    assert "human_review" in assert_problem(response, 400, "nested-decision")["detail"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"decision": "approve"', "not valid JSON"),
        (b"", "body is required"),
        (b"[]", "JSON object"),
        (b'"approve"', "JSON object"),
        (b"{}", "'decision' is required"),
        (b'{"reviewer_notes": "fine"}', "'decision' is required"),
        (b'{"decision": ""}', "decision"),
        (b'{"decision": 7}', "decision"),
        (b'{"decision": "approve", "extra": 1}', "extra"),
    ],
)
async def test_malformed_resume_bodies_are_400(
    api: Api, suspended_id: str, content: bytes, expected: str
) -> None:
    body = assert_problem(await api.resume(suspended_id, content=content), 400)
    assert expected in body["detail"]


async def test_overlong_reviewer_notes_are_400(api: Api, suspended_id: str) -> None:
    response = await api.resume(
        suspended_id, {"decision": "approve", "reviewer_notes": "x" * 10_001}
    )
    assert_problem(response, 400)


async def test_unknown_execution_is_404_for_reads_and_resume(api: Api) -> None:
    assert_problem(await api.get("no-such-execution"), 404, "execution-not-found")
    assert_problem(await api.audit("no-such-execution"), 404, "execution-not-found")
    assert_problem(
        await api.resume("no-such-execution", {"decision": "approve"}), 404, "execution-not-found"
    )


async def test_execution_of_another_workspace_is_404(api: Api, suspended_id: str) -> None:
    other = Api(api.client, workspace="another-workspace")
    assert_problem(await other.get(suspended_id), 404)
    assert_problem(await other.resume(suspended_id, {"decision": "approve"}), 404)
    elsewhere = Api(api.client, project="another-project")
    assert_problem(await elsewhere.get(suspended_id), 404)


async def test_resume_of_an_execution_that_is_not_suspended_is_409(
    api: Api, suspended_id: str
) -> None:
    assert (await api.resume(suspended_id, {"decision": "approve"})).status_code == 202
    await api.wait_for(suspended_id, "completed")
    body = assert_problem(
        await api.resume(suspended_id, {"decision": "approve"}), 409, "not-suspended"
    )
    assert "completed" in body["detail"]


async def test_invoke_errors(api: Api) -> None:
    # 400 like every other refusal of what was sent (422 before issue 21).
    body = assert_problem(await api.invoke(agent="no-such-agent"), 400, "unknown-agent")
    assert "refund-approval" in body["agents"]
    url = f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke"
    assert_problem(await api.client.post(url, json={"agent": "refund-approval"}), 400)
    both = {
        "agent": "refund-approval",
        "message": "a",
        "messages": [{"role": "user", "content": "b"}],
    }
    assert_problem(await api.client.post(url, json=both), 400)
    assert_problem(
        await api.client.post(url, json={"agent": "refund-approval", "message": "a", "x": 1}), 400
    )
    assert_problem(
        await api.client.post(url, content=b"{nope", headers={"content-type": "application/json"}),
        400,
        "invalid-json",
    )
    assert_problem(await api.client.post(url, json={"agent": "bad agent!", "message": "a"}), 400)
    bad_scope = "/api/v1/projects/bad%20project/workspaces/ws/invoke"
    assert_problem(
        await api.client.post(bad_scope, json={"agent": "refund-approval", "message": "a"}), 400
    )


async def test_invoke_input_that_would_start_nothing_anyone_asked_for(api: Api) -> None:
    url = f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke"
    empty = await api.client.post(url, json={"agent": "refund-approval", "messages": []})
    assert "'messages'" in assert_problem(empty, 400, "empty-messages")["detail"]
    blank = await api.client.post(url, json={"agent": "refund-approval", "message": "   "})
    assert "'message'" in assert_problem(blank, 400, "blank-message")["detail"]
    blank_entry = {"agent": "refund-approval", "messages": [{"role": "user", "content": " "}]}
    response = await api.client.post(url, json=blank_entry)
    assert "'messages[0].content'" in assert_problem(response, 400, "blank-message")["detail"]
    keyed = {"agent": "refund-approval", "message": "refund 1042", "idempotency_key": "k-1"}
    disagreeing = await api.client.post(url, json=keyed, headers={"Idempotency-Key": "k-2"})
    assert_problem(disagreeing, 400, "idempotency-key-mismatch")
    agreeing = await api.client.post(url, json=keyed, headers={"Idempotency-Key": "k-1"})
    assert agreeing.status_code == 202, agreeing.text


async def test_bodies_that_are_not_json_text(api: Api, suspended_id: str) -> None:
    url = f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke"
    form = await api.client.post(url, data={"agent": "refund-approval", "message": "hi"})
    assert "application/json" in assert_problem(form, 415, "unsupported-media-type")["detail"]
    plain = await api.client.post(
        url,
        content=b'{"agent": "refund-approval", "message": "hi"}',
        headers={"content-type": "text/plain"},
    )
    assert_problem(plain, 415, "unsupported-media-type")
    resumed = await api.client.post(
        f"/api/v1/projects/{api.project}/executions/{suspended_id}/resume",
        params={"workspace_id": api.workspace},
        content=b"decision=approve",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert_problem(resumed, 415, "unsupported-media-type")
    latin1 = b'{"agent": "refund-approval", "message": "caf\xe9"}'
    broken = await api.client.post(
        url, content=latin1, headers={"content-type": "application/json"}
    )
    assert_problem(broken, 400, "invalid-utf8")
    assert (await api.status_of(suspended_id))["status"] == "suspended"


async def test_query_errors(api: Api) -> None:
    base = f"/api/v1/projects/{api.project}/executions"
    assert_problem(await api.client.get(base), 400)  # workspace_id is required
    assert_problem(
        await api.client.get(base, params={"workspace_id": api.workspace, "status": "bogus"}), 400
    )
    assert_problem(
        await api.client.get(base, params={"workspace_id": api.workspace, "limit": 0}), 400
    )
    assert_problem(
        await api.client.get(base, params={"workspace_id": api.workspace, "cursor": "garbage!"}),
        400,
        "invalid-cursor",
    )


async def test_unknown_routes_and_methods_are_problems(api: Api) -> None:
    missing = assert_problem(await api.client.get("/api/v1/nothing-here"), 404, "not-found")
    assert "GET /api/v1/nothing-here" in missing["detail"]
    slashed = f"/api/v1/projects/{api.project}/executions/a%20b%2Fc"
    assert "%2F" in assert_problem(await api.client.get(slashed), 404, "not-found")["detail"]
    wrong = await api.client.delete(f"/api/v1/projects/{api.project}/executions")
    assert "allowed: GET" in assert_problem(wrong, 405, "method-not-allowed")["detail"]


async def test_no_input_produces_a_500(api: Api, suspended_id: str) -> None:
    """A spread of hostile bodies against every write endpoint: always a 2xx or a 4xx problem."""
    bodies: list[Any] = [
        None,
        0,
        -1,
        1e308,
        True,
        "",
        "x" * 200_000,
        [],
        [{}],
        {"": ""},
        {"decision": None},
        {"decision": ["approve"]},
        {"decision": {"$gt": ""}},
        {"decision": "approve\u0000"},
        {"decision": "a" * 300},
        {"agent": None},
        {"agent": "refund-approval", "message": None},
        {"agent": "refund-approval", "messages": "hi"},
        {"agent": "refund-approval", "messages": [{"role": "robot", "content": "x"}]},
        {"agent": "refund-approval", "message": "x", "idempotency_key": ""},
    ]
    invoke = f"/api/v1/projects/{api.project}/workspaces/{api.workspace}/invoke"
    for body in bodies:
        for response in (
            await api.resume("unknown-id", body),
            await api.client.post(invoke, json=body),
        ):
            assert response.status_code < 500, (body, response.text)
            if response.status_code >= 400:
                assert response.headers["content-type"] == PROBLEM
