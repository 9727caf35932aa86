"""A thread's next turn as the LangGraph API starts it: a run's input, a state update, a fork
from a checkpoint of the thread's history, or the turn after such a checkpoint run again (Agent
Chat UI's "regenerate": a run with a ``checkpoint`` and no input)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from services.gateway.langgraph.requests import RunRequest
from services.gateway.problems import Problem
from shared.domain.execution import Execution
from shared.domain.threads import base_of
from shared.events import AgentInput, BusyThreadPolicy
from shared.store.threads import ThreadRecord

if TYPE_CHECKING:
    from services.gateway.langgraph.service import LangGraphService

THREAD_START = (1, 0)
"""The checkpoint ``epoch-0`` names (turn 1 before it ran): the thread's start, the parent of
its first turn's state, empty."""


@dataclass(frozen=True)
class Fork:
    """A run from a checkpoint of the thread's history starts from ``base``'s state (None: the
    thread's start, nothing)."""

    base: str | None


@dataclass(frozen=True)
class NewTurn:
    """What a new turn of a thread is: its agent and input, its policy on a busy thread, a run
    or an update of the state, and the turn it starts from when not the latest (a fork)."""

    agent: str
    given: AgentInput
    policy: BusyThreadPolicy
    kind: Literal["run", "update"] = "run"
    as_node: str | None = None
    base: str | None = None
    fork: bool = False
    """The turn starts from ``base`` even when it is None (a fork from the thread's start)."""
    empty: bool = False
    """The thread was created by this request: it has no turn yet."""
    webhook: str | None = None
    """Where to tell that the turn's first run ended (LangGraph's ``webhook``)."""


async def again_from(
    service: LangGraphService, record: ThreadRecord, body: RunRequest, fork: Fork | None
) -> NewTurn:
    """A run with a checkpoint and no input: the turn that followed that checkpoint on the
    thread's branch, run again from it as a fork (its input as it was). LangGraph runs the node
    due next at a checkpoint; Interlock checkpoints once per turn, and the state a turn's parent
    checkpoint names is where that turn's input ran from, so running again from it is that
    turn's input, again (Agent Chat UI regenerates an answer this way)."""
    assert fork is not None  # run_request accepts no input only with a checkpoint
    latest = await service.conversations.latest(record)
    following = await _turn_after(service, latest, fork.base)
    if following is None:
        raise Problem(
            409,
            "nothing-to-run",
            "Nothing to run from this checkpoint",
            f"checkpoint {body.fork_checkpoint()!r} is where thread {record.thread_id} stands:"
            " no turn followed it on this branch to run again; send an input",
        )
    turn = following.input.turn
    return NewTurn(
        agent=body.assistant_id,
        given=following.input,
        policy=body.multitask_strategy or "enqueue",
        kind=turn.kind if turn else "run",
        as_node=turn.as_node if turn else None,
        base=fork.base,
        fork=True,
    )


async def _turn_after(
    service: LangGraphService, latest: Execution | None, base: str | None
) -> Execution | None:
    """The turn of the branch ending at ``latest`` that started from ``base`` (read back turn by
    turn, as the history is)."""
    execution = latest
    while execution is not None:
        if base_of(execution) == base:
            return execution
        execution = await service.conversations.base(execution)
    return None
