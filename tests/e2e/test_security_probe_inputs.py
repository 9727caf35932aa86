"""Issue 31's second probe, findings 5 and 6, as the attacks, on the four services as separate
processes over Kafka and FerretDB: bodies with ``1e400``, ``-1e400`` or a lone surrogate
(``"\\ud800"``) were 500s with tracebacks on the native resume and on the LangGraph routes, and
``/debug/tasks`` answered anyone on the health port with the ids of the keys whose streams were
open. Now each body is a 400 problem and nothing of it is stored, and ``/debug/tasks`` does not
exist without the operators' token, answers 401 without it, and names no key."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import PROJECT, WORKSPACE, Api
from tests.e2e.test_security_edge import gateway_process, problem
from tests.langgraph_sdk.flows import REFUND, REFUND_INPUT
from tests.ports import free_port

pytestmark = pytest.mark.e2e

HOSTILE = [
    ("1e400", "json-number-out-of-range"),
    ("-1e400", "json-number-out-of-range"),
    ('"\\ud800"', "json-unpaired-surrogate"),
]
"""Each value as JSON text, and the problem type it is answered with."""
LANGGRAPH = f"/langgraph/projects/{PROJECT}/workspaces/{WORKSPACE}"
JSON = {"content-type": "application/json"}


async def post(client: httpx.AsyncClient, url: str, body: str, **kwargs: Any) -> httpx.Response:
    return await client.post(url, content=body.encode(), headers=JSON, **kwargs)


# --- finding 5: numbers out of range and lone surrogates ----------------------------------------


async def test_the_native_resume_refuses_them_and_the_execution_still_waits(api: Api) -> None:
    suspended = await api.start_suspended()
    execution_id = suspended["execution_id"]
    for value, slug in HOSTILE:
        for body in (
            f'{{"decision": "approve", "generation": {value}}}',
            f'{{"decision": {value}}}',
            f'{{"decision": "approve", "reviewer_notes": {value}}}',
            f'{{"decision": "approve", "decisions": [{{"note": {value}}}]}}',
        ):
            answer = await api.resume(execution_id, content=body.encode())
            found = problem(answer, 400, slug)
            assert found["instance"].endswith("/resume"), found
    # An integer no store holds is out of range too (MongoDB's are 64-bit).
    answer = await api.resume(
        execution_id, content=b'{"decision": "approve", "generation": 1' + b"0" * 30 + b"}"
    )
    problem(answer, 400, "json-number-out-of-range")
    after = await api.status_of(execution_id)
    assert after["status"] == "suspended"
    assert after["generation"] == suspended["generation"]
    approved = await api.resume(execution_id, {"decision": "approve"})
    assert approved.status_code == 202, approved.text  # the execution is none the worse


async def test_the_langgraph_routes_refuse_them_and_store_nothing(
    cluster: Cluster, api: Api
) -> None:
    client = api.client
    created = await client.post(f"{LANGGRAPH}/threads", json={"metadata": {"case": "probe"}})
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    waited = await client.post(
        f"{LANGGRAPH}/threads/{thread_id}/runs/wait",
        json={"assistant_id": REFUND, "input": REFUND_INPUT},
    )
    assert waited.status_code == 200, waited.text
    [interrupt] = waited.json()["__interrupt__"]

    for value, slug in HOSTILE:
        refused = {
            "threads/search limit": await post(
                client, f"{LANGGRAPH}/threads/search", f'{{"limit": {value}}}'
            ),
            "threads/search metadata": await post(
                client, f"{LANGGRAPH}/threads/search", f'{{"metadata": {{"case": {value}}}}}'
            ),
            "assistants/search offset": await post(
                client, f"{LANGGRAPH}/assistants/search", f'{{"offset": {value}}}'
            ),
            "assistants/search limit": await post(
                client, f"{LANGGRAPH}/assistants/search", f'{{"limit": {value}}}'
            ),
        }
        for path in (f"threads/{thread_id}/runs", f"threads/{thread_id}/runs/wait", "runs/wait"):
            for resume in (value, f'{{"decision": {value}}}', f'{{"{interrupt["id"]}": {value}}}'):
                body = f'{{"assistant_id": "{REFUND}", "command": {{"resume": {resume}}}}}'
                if path == "runs/wait":
                    body = body[:-1] + f', "thread_id": "{thread_id}"}}'
                refused[f"{path} resume {resume}"] = await post(client, f"{LANGGRAPH}/{path}", body)
        squatted = str(uuid.uuid4())
        refused["threads create"] = await post(
            client,
            f"{LANGGRAPH}/threads",
            f'{{"thread_id": "{squatted}", "metadata": {{"case": {value}}}}}',
        )
        refused["threads create deep"] = await post(
            client,
            f"{LANGGRAPH}/threads",
            f'{{"thread_id": "{squatted}", "metadata": {{"deep": [{{"x": {value}}}]}}}}',
        )
        for what, answer in refused.items():
            assert answer.status_code == 400, f"{what} with {value}: {answer.text}"
            problem(answer, 400, slug)
        # Nothing of it was stored.
        assert (await client.get(f"{LANGGRAPH}/threads/{squatted}")).status_code == 404

    state = await client.get(f"{LANGGRAPH}/threads/{thread_id}")
    assert state.json()["status"] == "interrupted", state.text  # still waiting, undecided
    assert state.json()["metadata"]["case"] == "probe"
    done = await client.post(
        f"{LANGGRAPH}/threads/{thread_id}/runs/wait",
        json={"assistant_id": REFUND, "command": {"resume": "approve"}},
    )
    assert done.status_code == 200, done.text
    assert done.json()["outcome"] == "refunded", done.text


async def test_surrogate_pairs_and_large_finite_numbers_still_pass(api: Api) -> None:
    """What is refused is exactly what no answer or store can hold: an emoji escaped as its
    surrogate pair, 1e308 and a 64-bit integer are stored and answered as sent."""
    body = (
        '{"metadata": {"emoji": "\\ud83d\\ude00", "big": 1e308, "small": -1e-400,'
        ' "int": 9223372036854775807}}'
    )
    created = await post(api.client, f"{LANGGRAPH}/threads", body)
    assert created.status_code == 200, created.text
    thread_id = created.json()["thread_id"]
    stored = (await api.client.get(f"{LANGGRAPH}/threads/{thread_id}")).json()["metadata"]
    assert stored == {"emoji": "😀", "big": 1e308, "small": 0.0, "int": 9223372036854775807}


# --- finding 6: /debug/tasks --------------------------------------------------------------------


async def test_debug_tasks_is_not_served_without_the_operators_token(cluster: Cluster) -> None:
    """The cluster's processes run as a deployment does by default: no token, no route, on every
    service's health listener (whatever a caller sends)."""
    async with httpx.AsyncClient(timeout=10) as client:
        for (service, index), port in cluster.health_ports.items():
            url = f"http://127.0.0.1:{port}/debug/tasks"
            for headers in ({}, {"Authorization": "Bearer anything-at-all-goes-here"}):
                answer = await client.get(url, headers=headers)
                assert answer.status_code == 404, f"{service}-{index}: {answer.text[:300]}"
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200


async def test_debug_tasks_answers_only_its_token_and_names_no_key(
    cluster: Cluster, api: Api
) -> None:
    token = uuid.uuid4().hex
    health = free_port()
    execution_id = (await api.start_suspended())["execution_id"]
    secret = await cluster.key(PROJECT, "PROJECT_READ_ONLY")
    key_id = secret.split("_")[1]
    async with gateway_process(
        cluster,
        "gateway-debug-tasks",
        INTERLOCK_HEALTH_PORT=str(health),
        INTERLOCK_DEBUG_TASKS_TOKEN=token,
    ) as gateway:
        assert gateway.health_url is not None
        url = f"{gateway.health_url}/debug/tasks"
        stream = f"/api/v1/projects/{PROJECT}/executions/{execution_id}/stream"
        headers = {"Authorization": f"Bearer {secret}"}
        async with (
            gateway.client(headers=headers) as client,
            aconnect_sse(client, "GET", stream, params={"workspace_id": WORKSPACE}) as source,
            httpx.AsyncClient(timeout=10) as operator,
        ):
            assert source.response.status_code == 200
            events = source.aiter_sse()  # held: a dropped iterator closes the stream
            async for event in events:
                if event.event == "interrupt":
                    break  # the stream is open, and its key is re-checked by a timer task
            for authorization in (
                None,
                "Bearer wrong",
                f"Bearer {token}x",
                f"Basic {token}",
                secret,
            ):
                sent = {} if authorization is None else {"Authorization": authorization}
                refused = await operator.get(url, headers=sent)
                assert refused.status_code == 401, refused.text
                assert "---" not in refused.text
            listing = await operator.get(url, headers={"Authorization": f"Bearer {token}"})
            assert listing.status_code == 200, listing.text
            assert "recheck a stream key" in listing.text, listing.text[-3000:]
            assert key_id not in listing.text
            assert execution_id not in listing.text
        # The API port has no such route, token or not.
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            answer = await client.get("/debug/tasks", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 404
