"""The CLI's wait against a gateway stubbed with ``httpx.MockTransport``: a caller that asked for
progress gets the agent's node updates even when the agent suspended before the first look."""

from __future__ import annotations

import httpx

from interlock.client.api import Gateway, Json, settled
from interlock.client.config import Config

SUSPENDED = {"execution_id": "e1", "status": "suspended", "generation": 1}
STREAM = (
    'id: 1/a\nevent: update\ndata: {"node": "plan"}\n\n'
    'id: 2/a\nevent: interrupt\ndata: {"generation": 1}\n\n'
)


def gateway_with(requests: list[str]) -> Gateway:
    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request.url.path)
        if request.url.path.endswith("/stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=STREAM.encode()
            )
        return httpx.Response(200, json=SUSPENDED)

    http = httpx.Client(transport=httpx.MockTransport(answer))
    return Gateway(http, Config(url="http://gw", api_key="k", project="p", workspace="w"))


def test_progress_is_replayed_when_the_agent_settled_before_the_first_look() -> None:
    requests: list[str] = []
    progress: list[tuple[str, Json]] = []
    execution = gateway_with(requests).wait(
        "e1", settled, timeout=5, on_progress=lambda kind, data: progress.append((kind, data))
    )
    assert execution == SUSPENDED
    assert progress == [("update", {"node": "plan"})]
    assert sum(path.endswith("/stream") for path in requests) == 1


def test_without_progress_a_settled_execution_costs_one_read() -> None:
    requests: list[str] = []
    execution = gateway_with(requests).wait("e1", settled, timeout=5, on_progress=None)
    assert execution == SUSPENDED
    assert requests == ["/api/v1/projects/p/executions/e1"]
