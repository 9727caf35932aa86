"""Issue 35, item 3: the LangGraph routes read a thread's turns from its hint (``turns``) in
fewer reads (a thread that has noted no turn: its first turn alone; a decision: the hinted
turn's head when it waits for a review), and a hint that trails the turns (a note that failed:
``thread.turn_not_noted``) still finds where the thread stands. Over the in-process services,
with the thread store's notes failing from a given turn on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from shared.domain.execution import ExecutionStatus
from shared.domain.threads import turn_execution_id
from shared.store.api_keys import Role, create_key
from tests.counting_store import CountingStore
from tests.unit.inprocess import World

REFUND = "refund-approval"
THREAD = "t-trailing"
URL = f"/langgraph/projects/p1/workspaces/w1/threads/{THREAD}"


def message(text: str) -> dict[str, Any]:
    return {"assistant_id": REFUND, "input": {"messages": [{"role": "user", "content": text}]}}


APPROVE = {"assistant_id": REFUND, "command": {"resume": "approve"}}


class NotesFailFrom:
    """The thread store, its ``note_turn`` failing for turn ``first`` and after."""

    def __init__(self, threads: Any, first: int) -> None:
        self._threads = threads
        self._first = first

    async def note_turn(self, project_id: str, workspace_id: str, thread_id: str, turn: int,
                        **kwargs: Any) -> None:  # fmt: skip
        if turn >= self._first:
            raise ConnectionError("the store went away")
        await self._threads.note_turn(project_id, workspace_id, thread_id, turn, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._threads, name)


Opened = Callable[[int], Awaitable[httpx.AsyncClient]]
"""A gateway on the world's services whose thread notes fail from the turn given on."""


@pytest.fixture
async def gateway(world: World, monkeypatch: pytest.MonkeyPatch) -> Opened:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)

    async def opened(notes_fail_from: int) -> httpx.AsyncClient:
        store = CountingStore(world.store)
        store.threads = NotesFailFrom(world.store.threads, notes_fail_from)
        built = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
        app = create_app(built, store=store, publisher=world.bus)  # type: ignore[arg-type]
        _, owner = await create_key(
            world.store.api_keys, project_id="p1", role=Role.OWNER, name="o", email="o@x.com"
        )
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://gateway",
            headers={"authorization": f"Bearer {owner}"},
        )

    return opened


async def statuses(world: World, turns: int) -> list[ExecutionStatus]:
    ids = [turn_execution_id("p1", "w1", THREAD, n) for n in range(1, turns + 1)]
    return [(await world.execution(i)).status for i in ids]


async def post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = await http.post(f"{URL}{path}", json=body)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def test_a_thread_that_noted_no_turn_still_finds_its_turns(
    world: World, gateway: Opened
) -> None:
    """Every note fails: the hint stays 0 while the thread runs two turns. The second input,
    started as the first turn without a read, is refused by turn 1's key and becomes the second
    turn (the same text: two requests are two turns), and each decision answers its own."""
    async with await gateway(1) as http:
        created = await http.post(
            "/langgraph/projects/p1/workspaces/w1/threads", json={"thread_id": THREAD}
        )
        assert created.status_code == 200, created.text
        first = await post(http, "/runs/wait", message("Refund claim CLM-4821"))
        assert "__interrupt__" in first, first
        done = await post(http, "/runs/wait", APPROVE)
        assert done["refund_id"].startswith("RF-"), done
        second = await post(http, "/runs/wait", message("Refund claim CLM-4821"))
        assert "__interrupt__" in second, second
        assert await statuses(world, 2) == [ExecutionStatus.COMPLETED, ExecutionStatus.SUSPENDED]
        approved = await post(http, "/runs/wait", APPROVE)
        assert approved["refund_id"].startswith("RF-"), approved
        assert await statuses(world, 2) == [ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED]
        record = await world.store.threads.get("p1", "w1", THREAD)
        assert record is not None and record.turns == 0


async def test_a_decision_past_a_hint_that_names_an_ended_turn_answers_the_waiting_one(
    world: World, gateway: Opened
) -> None:
    """The hint names turn 1 (ended) while turn 2 waits for its review: the hinted turn's head
    is read past, and the decision answers turn 2."""
    async with await gateway(2) as http:
        await http.post("/langgraph/projects/p1/workspaces/w1/threads", json={"thread_id": THREAD})
        await post(http, "/runs/wait", message("Refund claim CLM-4821"))
        await post(http, "/runs/wait", APPROVE)
        await post(http, "/runs/wait", message("Refund claim CLM-4821"))
        record = await world.store.threads.get("p1", "w1", THREAD)
        assert record is not None and record.turns == 1
        done = await post(http, "/runs/wait", APPROVE)
        assert done["refund_id"].startswith("RF-"), done
        assert await statuses(world, 2) == [ExecutionStatus.COMPLETED, ExecutionStatus.COMPLETED]
