"""Clients that hold conversations (sessions, which are LangGraph threads) of the
``conversation`` agent (agents/conversation.py) through the gateway, for the chaos scenarios:
each sends its turns one after the other, queues its follow-ups (``enqueue``, the default)
while a turn waits for a review, answers the review once the scenario lets reviewers act, and
records what it sent and was answered (``ConversationRecord``) for the invariant checker. Half
of them speak Interlock's own API, half LangGraph's: a session and a thread are one record.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any, Literal

import httpx

from shared.domain.runs import run_id
from shared.domain.threads import turn_execution_id
from tests.chaos.invariants import ConversationRecord, Message
from tests.chaos.workload import TERMINAL, Workload, wait_retry_after

AGENT = "conversation"
TURNS = 5
REVIEWED = 3
"""The turn that waits for a review: its two follow-ups are queued behind it while it waits."""
DECISION = "approve"

Api = Literal["native", "langgraph"]


def messages(index: int) -> list[str]:
    """Conversation ``index``'s five messages. The third asks for a refund, so it waits for a
    review; "wait 1" keeps the others running for a second, so a fault finds turns running."""
    return [
        f"hello from chat {index}, wait 1",
        f"my order is number {index}, wait 1",
        f"refund order {index} please",
        f"thanks from chat {index}, wait 1",
        f"bye from chat {index}, wait 1",
    ]


def said(text: str) -> dict[str, Any]:
    """A human message as LangGraph's input state."""
    return {"messages": [{"role": "user", "content": text}]}


def state_messages(values: Any) -> list[Message] | None:
    """A state's ``messages`` as ``(type, content)``, or None when it holds none."""
    if not isinstance(values, dict) or not isinstance(values.get("messages"), list):
        return None
    return [(str(m.get("type")), str(m.get("content"))) for m in values["messages"]]


class Conversation:
    """One client's conversation: ``run`` drives its five turns; ``stage`` says where it is, for
    the scenario to time its faults."""

    def __init__(
        self, workload: Workload, index: int, *, api: Api, reviews_open: asyncio.Event
    ) -> None:
        self.workload = workload
        self.api = api
        self.reviews_open = reviews_open
        self.texts = messages(index)
        self.record = ConversationRecord(
            project_id=workload.project,
            workspace_id=workload.workspace,
            thread_id=f"chat-{uuid.uuid4().hex[:8]}-{index}",
        )
        self.parked = False
        """Its reviewed turn waits for the review with both follow-ups queued behind it."""
        self.resumed = False
        """Its reviewed turn completed: the queued turns behind it are woken, one after the
        other."""
        workload.conversations.append(self.record)

    @property
    def thread_id(self) -> str:
        return self.record.thread_id

    @property
    def langgraph(self) -> str:
        return f"/langgraph/projects/{self.workload.project}/workspaces/{self.workload.workspace}"

    def execution_id(self, turn: int) -> str:
        record = self.record
        return turn_execution_id(record.project_id, record.workspace_id, record.thread_id, turn)

    # --- one turn ------------------------------------------------------------------------------

    async def send(self, turn: int, deadline: float) -> str | None:
        """Send message ``turn`` as the thread's next turn; the execution it became. A message
        is not keyed (a turn's request carries no idempotency key): after no answer, the client
        looks at the turn it asked for before it asks again, so a retry never adds a turn."""
        text = self.texts[turn - 1]
        self.record.sent.append(text)
        while time.monotonic() < deadline:
            response = await self._post_turn(text, turn)
            if response is not None and response.is_success:
                number, execution_id = self._accepted(response, turn)
                self.record.accepted.append((number, execution_id))
                self.workload.created.add(execution_id)
                self.workload.progressed()
                return execution_id
            if response is not None and response.status_code not in (429, 503):
                self.record.problems.append(
                    f"turn {turn} ({self.api}): {response.status_code} {response.text[:200]}"
                )
                return None
            await wait_retry_after(response)
            taken = await self.workload.status(self.execution_id(turn))
            if taken is not None:
                if text not in str(taken.get("input")):
                    self.record.problems.append(f"turn {turn} holds {taken.get('input')!r}")
                    return None
                self.record.accepted.append((turn, str(taken["execution_id"])))
                self.workload.created.add(str(taken["execution_id"]))
                return str(taken["execution_id"])
        return None

    async def _post_turn(self, text: str, turn: int) -> httpx.Response | None:
        if self.api == "native":
            return await self.workload.call(
                "POST",
                f"{self.workload.scope}/workspaces/{self.workload.workspace}/invoke",
                json={"agent": AGENT, "message": text, "session_id": self.thread_id},
            )
        return await self.workload.call(
            "POST",
            f"{self.langgraph}/threads/{self.thread_id}/runs",
            execution_id=self.execution_id(turn),
            json={"assistant_id": AGENT, "input": said(text)},
        )

    def _accepted(self, response: httpx.Response, turn: int) -> tuple[int, str]:
        """The turn and execution the gateway answered: the native 202 names both; a LangGraph
        run names its run, which is turn ``n``'s first run only if it is turn ``n``."""
        body = response.json()
        if self.api == "native":
            return int(body.get("turn") or 0), str(body["execution_id"])
        for number in range(1, TURNS + 3):
            if body.get("run_id") == run_id(self.execution_id(number), 1):
                return number, self.execution_id(number)
        self.record.problems.append(f"turn {turn}: run {body.get('run_id')} is no turn's first")
        return 0, str(body.get("run_id"))

    async def until(self, execution_id: str, wanted: Iterable[str], deadline: float) -> str | None:
        """Wait until the execution's status is one of ``wanted`` (or terminal): that status,
        or None at the deadline. Reads it when the watcher announces a change, as a reviewer
        acts on a notification."""
        wanted = set(wanted)
        seen = None
        while time.monotonic() < deadline:
            body = await self.workload.status(execution_id)
            if body is None:
                continue
            status = str(body["status"])
            if status != seen:
                seen = status
                self.workload.progressed()
            if status in wanted or status in TERMINAL:
                return status
            await self.workload.next_look(execution_id, 0.3)
        return None

    async def answer(self, execution_id: str, deadline: float) -> bool:
        """Approve the review the turn waits for; True once the gateway accepted it (or told us
        it was decided already: an earlier attempt of ours whose answer was lost)."""
        while time.monotonic() < deadline:
            body = await self.workload.status(execution_id)
            if body is None:
                continue
            if body["status"] != "suspended":
                return True  # decided (by an attempt whose answer we lost) and resuming
            if self.api == "native":
                status = await self.workload.decide(
                    execution_id, int(body.get("suspension_id") or 0), DECISION
                )
            else:
                response = await self.workload.call(
                    "POST",
                    f"{self.langgraph}/threads/{self.thread_id}/runs",
                    execution_id=execution_id,
                    json={"assistant_id": AGENT, "command": {"resume": DECISION}},
                )
                status = None if response is None else response.status_code
            if status is not None and 200 <= status < 300:
                return True
            if status == 409:
                return True
            await asyncio.sleep(0.5)
        return False

    # --- the conversation ----------------------------------------------------------------------

    async def run(self, deadline: float) -> None:
        if self.api == "langgraph":
            created = await self.workload.call(
                "POST",
                f"{self.langgraph}/threads",
                json={"thread_id": self.thread_id, "if_exists": "do_nothing"},
            )
            if created is None or not created.is_success:
                self.record.problems.append(f"thread not created: {created}")
                return
        ids: dict[int, str] = {}
        for turn in range(1, REVIEWED + 1):
            execution_id = await self.send(turn, deadline)
            if execution_id is None:
                return
            ids[turn] = execution_id
            expect = "suspended" if turn == REVIEWED else "completed"
            status = await self.until(execution_id, {expect}, deadline)
            if status != expect:
                return
        # Both follow-ups queue behind the review (enqueue, the default).
        for turn in range(REVIEWED + 1, TURNS + 1):
            execution_id = await self.send(turn, deadline)
            if execution_id is None:
                return
            ids[turn] = execution_id
        self.parked = True
        await self.reviews_open.wait()
        if not await self.answer(ids[REVIEWED], deadline):
            return
        self.record.decisions[REVIEWED] = DECISION
        for turn in range(REVIEWED, TURNS + 1):
            if await self.until(ids[turn], {"completed"}, deadline) != "completed":
                return
            self.resumed = True
        self.record.finished = True

    # --- what the gateway shows at the end -----------------------------------------------------

    async def read_back(self) -> None:
        """Read the thread as it ended: its turns (the session), each completed turn's state,
        the thread's state and history (LangGraph's)."""
        workload, record = self.workload, self.record
        response = await workload.call(
            "GET",
            f"{workload.scope}/sessions/{self.thread_id}",
            params={"workspace_id": workload.workspace, "limit": 20},
        )
        if response is not None and response.status_code == 200:
            record.listed = [
                (int(t["turn"]), str(t["execution_id"]), str(t["status"]))
                for t in response.json()["turns"]
            ]
        for turn, execution_id, status in record.listed:
            workload.created.add(execution_id)
            if status != "completed":
                continue
            body = await workload.status(execution_id)
            state = state_messages(body.get("result")) if body is not None else None
            if state is not None:
                record.states[turn] = state
        response = await workload.call("GET", f"{self.langgraph}/threads/{self.thread_id}/state")
        if response is not None and response.status_code == 200:
            record.final = state_messages(response.json().get("values"))
        response = await workload.call(
            "POST", f"{self.langgraph}/threads/{self.thread_id}/history", json={"limit": 20}
        )
        if response is not None and response.status_code == 200:
            record.history = [len(state_messages(h.get("values")) or []) for h in response.json()]
