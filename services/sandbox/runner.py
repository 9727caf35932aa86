"""LangGraph adapter: runs or resumes one execution's graph from its checkpoint.

What to do with a dispatch is read from the checkpoint, never assumed, so a re-sent or stale
command cannot run the agent twice:

- start, no checkpoint yet: run the graph on the input;
- start or resume, the graph already waits on an interrupt that this command does not answer:
  report that suspension again (it was reported before, or the decision was already applied);
- resume, the graph waits on exactly the interrupts this command answers: resume them, unless
  the suspension was taken under agent code that this sandbox no longer runs (refused);
- the graph finished (no task left at its latest checkpoint): report the result again;
- a checkpoint mid-run (a crashed attempt, perhaps with a node's writes stored but not the
  checkpoint after it): continue from it.

Each run is an **attempt** with a fencing token: checkpoint writes, step-cache writes and the
final report first check that no newer attempt has begun (see shared/store/attempts.py). The
steps that completed before are served from the step cache, read in one query per run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import structlog
from langgraph.graph import END
from langgraph.pregel import Pregel
from langgraph.types import Command, StateSnapshot
from opentelemetry import context as otel_context

from interlock.sdk.runtime import StepRun, step_run
from services.sandbox.agent_memory import bound_tenant
from services.sandbox.checkpoint_run import at_the_end, head_extra, known_to_be_new
from services.sandbox.checkpoint_run import run_scope as checkpoint_run_scope
from services.sandbox.checkpointer import current_fence
from services.sandbox.commands import graph_command, unknown_targets
from services.sandbox.jsonable import to_jsonable
from services.sandbox.loading import AgentNotLoadable, GraphCache, LoadedAgent
from services.sandbox.progress import STREAM_MODES, ProgressAnnouncer, ProgressRecorder
from services.sandbox.reviews import interrupt_reviews
from services.sandbox.step_index import StepIndex
from services.sandbox.thread_base import CheckpointNotFound, copy_base, is_base_copy
from shared import metrics
from shared.errors import Fenced, is_transient
from shared.events import (
    DispatchKind,
    ExecutionDispatched,
    InterruptReview,
    PendingInterrupt,
    ThreadTurn,
    ToolRule,
)
from shared.graph_tracing import GraphSpans
from shared.store.attempts import AttemptLedger
from shared.store.memory.progress import InMemoryProgressLog
from shared.store.ports import StepStore
from shared.store.progress import ProgressLog

Graph = Pregel[Any, Any, Any, Any]

log = structlog.get_logger(__name__)


FENCE_RECHECK_SECONDS = 2.0
"""Before storing a step or a checkpoint, a check that the attempt is current made this recently
stands. Neither write needs it to be safe: the first write of a step's key wins for every
attempt, and a checkpoint write fences itself (the head it replaces says which attempt wrote it:
services/sandbox/mongo_checkpoints.py). The check stops a superseded run early; before a report
it is always made (services/sandbox/handlers.py)."""
MAX_VERIFIED = 10_000


@dataclass(frozen=True)
class Suspended:
    interrupts: list[PendingInterrupt]
    agent_fingerprint: str | None = None
    reviews: list[InterruptReview] = field(default_factory=list)
    tools: dict[str, ToolRule] = field(default_factory=dict)
    values: dict[str, Any] | None = None
    """The graph's state values as JSON, or None (too large, or not an object)."""
    next: list[str] = field(default_factory=list)
    """The nodes that run when the graph resumes (LangGraph's ``StateSnapshot.next``)."""


@dataclass(frozen=True)
class Completed:
    result: Any


@dataclass(frozen=True)
class Failed:
    error_type: str
    message: str


@dataclass(frozen=True)
class Refused:
    """The run is not made, and the execution is suspended again to be answered later: the
    agent's code changed under the suspension, or cannot be loaded here."""

    message: str
    error_type: str = "AgentVersionChanged"


RunOutcome = Suspended | Completed | Failed | Refused

Admission = Callable[[], Awaitable[bool]]
"""Asked while a run begins its attempt and reads its checkpoint: may the run go on (is its
command still current)? A run it refuses raises ``NotCurrent`` before anything of it is
stored or runs."""


class NotCurrent(Exception):
    """The command is no longer current (``Admission``): nothing was run or reported."""


async def _admit_all() -> bool:
    return True


END_HERE = object()
"""``_next_input``'s answer for a resume that ends the run where it stands (``end``)."""


@dataclass(frozen=True)
class Attempt:
    """The fencing token of one run of a dispatch."""

    execution_id: str
    epoch: int
    number: int


def pending_interrupts(snapshot: StateSnapshot) -> list[PendingInterrupt]:
    return [
        PendingInterrupt(interrupt_id=i.id, value=to_jsonable(i.value)) for i in snapshot.interrupts
    ]


class AgentRunner:
    def __init__(
        self,
        graphs: GraphCache,
        *,
        steps: StepStore,
        attempts: AttemptLedger,
        run_timeout_seconds: float,
        max_step_result_bytes: int,
        progress: ProgressLog | None = None,
        announcer: ProgressAnnouncer | None = None,
    ) -> None:
        self._graphs = graphs
        self._announcer = announcer
        self._steps = steps
        self._attempts = attempts
        self._progress = progress or InMemoryProgressLog()
        self._run_timeout = run_timeout_seconds
        self._max_step_result_bytes = max_step_result_bytes
        self._verified: dict[Attempt, float] = {}
        """When each recent attempt was last found current (monotonic seconds)."""

    async def run(
        self,
        dispatch: ExecutionDispatched,
        custom_headers: Mapping[str, str] | None = None,
        admit: Admission = _admit_all,
    ) -> tuple[RunOutcome, Attempt | None]:
        """Run what the dispatch asks for, the caller's custom headers (opened) in the agent's
        run config, if ``admit`` agrees. Returns the outcome and the attempt that produced it
        (None when nothing had to run). Raises ``Fenced`` when a newer attempt took over,
        ``NotCurrent`` when ``admit`` refused."""
        # The run reads its thread's checkpoint from the database once; the reads after (the
        # graph's own, the outcome's) are answered from what it read and wrote, and what it
        # wrote is stored when the scope ends, before the outcome is returned (and reported).
        # Its checkpoint keeps the execution's steps, so the next run reads them with it (no
        # query by fields).
        index = StepIndex()
        with bound_tenant(dispatch.project_id, dispatch.workspace_id):
            return await self._run_in_scope(dispatch, custom_headers, admit, index)

    async def _run_in_scope(
        self,
        dispatch: ExecutionDispatched,
        custom_headers: Mapping[str, str] | None,
        admit: Admission,
        index: StepIndex,
    ) -> tuple[RunOutcome, Attempt | None]:
        async with checkpoint_run_scope(extra=index.kept, guard=index.may_replace):
            outcome, attempt = await self._run(dispatch, custom_headers, index, admit)
            if attempt is not None:
                # Always read before the outcome is reported: a newer attempt may have begun
                # while this one ran. Made while the checkpoint is stored (the checkpoint write
                # fences itself): one round trip for both.
                current = attempt
                at_the_end(lambda: self.ensure_current(current))
            return outcome, attempt

    async def _run(
        self,
        dispatch: ExecutionDispatched,
        custom_headers: Mapping[str, str] | None,
        index: StepIndex,
        admit: Admission,
    ) -> tuple[RunOutcome, Attempt | None]:
        try:
            agent = self._graphs.get(dispatch.agent)
        except AgentNotLoadable as exc:
            if not await admit():
                raise NotCurrent from exc
            if dispatch.kind is DispatchKind.RESUME:
                # A broken release must not end the reviews waiting on it: the suspension is
                # kept, and answered again once a release loads the agent.
                return Refused(str(exc), "AgentNotLoadable"), None
            return Failed("AgentNotLoadable", str(exc)), None
        config = _run_config(dispatch, custom_headers)
        number, snapshot = await self._number_and_read(dispatch, agent, config, admit)
        turn = dispatch.input.turn if dispatch.input is not None else None
        if turn is not None and turn.kind == "update":
            attempt = Attempt(dispatch.execution_id, dispatch.epoch, number)
            return await self._update(agent, dispatch, turn, config, snapshot, attempt), attempt
        if turn is not None and is_base_copy(snapshot):
            # The turn's copy of its base is its newest checkpoint (a saver that stores each
            # checkpoint as it comes, and a run that died after the copy): its input has not
            # run yet, and the copy need not be made again.
            payload: Any = dispatch.input.graph_input() if dispatch.input is not None else None
        else:
            payload = self._next_input(dispatch, snapshot, agent)
        if isinstance(payload, Suspended | Completed | Failed | Refused):
            return payload, None
        attempt = Attempt(dispatch.execution_id, dispatch.epoch, number)
        if payload is END_HERE:
            return await self._end_here(agent, config, attempt), attempt

        async def fence() -> None:
            await self.ensure_current(attempt, within=FENCE_RECHECK_SECONDS)

        known = StepIndex.read(head_extra(dispatch.execution_id))
        steps = await StepRun.open(
            execution_id=dispatch.execution_id,
            epoch=dispatch.epoch,
            attempt=attempt.number,
            store=self._steps,
            max_result_bytes=self._max_step_result_bytes,
            fence=fence,
            known=known,
            # An earlier attempt of this epoch may have stored steps and died before its
            # checkpoint: look up what the index does not list.
            read_on_miss=known is not None and attempt.number > 1,
        )
        index.run = steps
        progress = ProgressRecorder(
            self._progress,
            project_id=dispatch.project_id,
            execution_id=dispatch.execution_id,
            epoch=dispatch.epoch,
            attempt=attempt.number,
            announcer=self._announcer,
        )
        resume = dispatch.resume
        if isinstance(payload, Command) and resume is not None and resume.decided_at is not None:
            # The graph resumes now: what a reviewer waits for after deciding (clocks of two
            # hosts, so a small skew shows; it is never negative here).
            waited = (datetime.now(UTC) - resume.decided_at).total_seconds()
            metrics.DECISION_TO_RESUME_SECONDS.observe(max(0.0, waited))
        # A thread's next turn has no checkpoint of its own yet: it starts from its base's.
        starts_turn = turn is not None and snapshot.created_at is None
        token = current_fence.set(fence)
        try:
            if starts_turn and turn is not None:
                try:
                    await copy_base(agent.graph.checkpointer, turn, config)
                except CheckpointNotFound as exc:
                    return Failed("CheckpointNotFound", str(exc)), attempt
            with step_run(steps):
                outcome = await self._stream(agent, payload, config, progress)
        finally:
            current_fence.reset(token)
        return outcome, attempt

    async def _update(
        self,
        agent: LoadedAgent,
        dispatch: ExecutionDispatched,
        turn: ThreadTurn,
        config: Any,
        snapshot: StateSnapshot,
        attempt: Attempt,
    ) -> RunOutcome:
        """A turn that writes state instead of running (``update_state``, or a thread's copy):
        from its base's checkpoint, the given values as ``as_node``'s output; its result is the
        state after. Done once: a redelivered dispatch finds the checkpoint and reports it."""
        if snapshot.created_at is None or is_base_copy(snapshot):

            async def fence() -> None:
                await self.ensure_current(attempt, within=FENCE_RECHECK_SECONDS)

            token = current_fence.set(fence)
            try:
                try:
                    # The copy may be there already (a saver that stores each checkpoint, and
                    # an attempt that died before the update).
                    if snapshot.created_at is None:
                        await copy_base(agent.graph.checkpointer, turn, config)
                except CheckpointNotFound as exc:
                    return Failed("CheckpointNotFound", str(exc))
                values = dispatch.input.graph_input() if dispatch.input is not None else {}
                if values:
                    try:
                        await agent.graph.aupdate_state(config, values, as_node=turn.as_node)
                    except Exception as exc:
                        if is_transient(exc):
                            raise
                        # The graph refused the update (an unknown node, a value its reducer
                        # cannot take): the client is told why.
                        return Failed(type(exc).__name__, str(exc) or type(exc).__name__)
            finally:
                current_fence.reset(token)
            snapshot = await agent.graph.aget_state(config)
        return Completed(to_jsonable(snapshot.values))

    async def _end_here(self, agent: LoadedAgent, config: Any, attempt: Attempt) -> RunOutcome:
        """An answer that ends the run where it stands (``end``): LangGraph's
        ``update_state(None, as_node=END)`` drops the pending interrupts and keeps the state.
        Done once: a redelivered dispatch finds nothing pending and reports the state again."""

        async def fence() -> None:
            await self.ensure_current(attempt, within=FENCE_RECHECK_SECONDS)

        token = current_fence.set(fence)
        try:
            await agent.graph.aupdate_state(config, None, as_node=END)
        finally:
            current_fence.reset(token)
        return Completed(to_jsonable((await agent.graph.aget_state(config)).values))

    async def _number_and_read(
        self, dispatch: ExecutionDispatched, agent: LoadedAgent, config: Any, admit: Admission
    ) -> tuple[int, StateSnapshot]:
        """Begin the attempt and read the thread's checkpoint, while ``admit`` is asked: the
        round trips at once, not one after the other. An attempt begun for a command that
        ``admit`` then refuses goes unused, as one whose checkpoint shows nothing left to run
        (a redelivered dispatch): a newer number only fences the attempts of its epoch, and an
        epoch whose command is no longer current has nothing left to write."""
        if dispatch.kind is DispatchKind.START and dispatch.epoch == 1:
            # The first attempt of an execution's first run is the only writer its thread has
            # had: there is no checkpoint to read.
            number, admitted = await _all(self._begin(dispatch), admit())
            if not admitted:
                raise NotCurrent
            if number == 1:
                known_to_be_new(dispatch.execution_id)
            return number, await agent.graph.aget_state(config)
        number, snapshot, admitted = await _all(
            self._begin(dispatch), agent.graph.aget_state(config), admit()
        )
        if not admitted:
            raise NotCurrent
        return number, snapshot

    async def _stream(
        self, agent: LoadedAgent, payload: Any, config: Any, progress: ProgressRecorder
    ) -> RunOutcome:
        """Run the graph to its next stop. A failure of a dependency (``is_transient``: the
        checkpoint or step store busy or down) is raised, so the delivery is retried; any other
        failure is the agent's own and becomes its outcome."""
        try:
            async with asyncio.timeout(self._run_timeout):
                # Checkpointed when the run exits (suspends, completes or fails), not after
                # every step: a crashed run starts again from its last checkpoint, and the
                # step cache serves what its durable steps had done (docs/durable-steps.md).
                # With subgraphs: their entries carry their namespace (stream_subgraphs).
                stream = agent.graph.astream(
                    payload, config, durability="exit", stream_mode=STREAM_MODES, subgraphs=True
                )
                async for part in stream:
                    # (namespace, mode, chunk): a list of modes, with subgraphs.
                    ns, mode, chunk = cast(tuple[tuple[str, ...], str, Any], part)
                    await progress.observe(mode, chunk, ns)
                # The last of it is stored and announced while the checkpoint is stored, and
                # still before the outcome is reported (the status that follows it).
                at_the_end(progress.flush)
        except Fenced:
            raise
        except TimeoutError:
            message = f"agent run exceeded {self._run_timeout:g}s (INTERLOCK_RUN_TIMEOUT_SECONDS)"
            return Failed("RunTimeout", message)
        except Exception as exc:
            if is_transient(exc):
                raise
            return Failed(type(exc).__name__, str(exc) or type(exc).__name__)
        return _outcome_of(await agent.graph.aget_state(config), agent)

    async def _begin(self, dispatch: ExecutionDispatched) -> int:
        number = await self._attempts.begin(dispatch.execution_id, dispatch.epoch)
        # Just numbered, so current now: its first steps need not check again.
        self._verified[Attempt(dispatch.execution_id, dispatch.epoch, number)] = time.monotonic()
        return number

    async def ensure_current(self, attempt: Attempt, *, within: float = 0.0) -> None:
        """Raise ``Fenced`` when a newer attempt took the run over (a rebalance gave its dispatch
        to another replica, which began a newer attempt). A check of this attempt made less than
        ``within`` seconds ago stands (see ``FENCE_RECHECK_SECONDS``);
        no check closes the window between itself and the write it guards anyway."""
        now = time.monotonic()
        last = self._verified.get(attempt)
        if last is not None and now - last < within:
            return
        if await self._attempts.is_superseded(attempt.execution_id, attempt.epoch, attempt.number):
            raise Fenced(
                f"attempt {attempt.number} at epoch {attempt.epoch} of {attempt.execution_id}"
                " was superseded by a newer attempt"
            )
        self._verified[attempt] = now
        if len(self._verified) > MAX_VERIFIED:
            self._verified.pop(next(iter(self._verified)))

    @staticmethod
    def _next_input(
        dispatch: ExecutionDispatched, snapshot: StateSnapshot, agent: LoadedAgent
    ) -> Any:
        has_checkpoint = snapshot.created_at is not None
        pending = [i.id for i in snapshot.interrupts]
        resume = dispatch.resume
        # A resume answers some or all of the pending interrupts (one at a time is fine: the
        # others stay pending and the graph suspends again on them).
        answers_pending = (
            dispatch.kind is DispatchKind.RESUME
            and resume is not None
            and bool(resume.interrupt_ids)
            and set(resume.interrupt_ids) <= set(pending)
        )
        if answers_pending and resume is not None:
            if not agent.version.accepts(resume.agent_fingerprint):
                return Refused(
                    f"the execution suspended under agent version {resume.agent_fingerprint},"
                    f" but this sandbox runs version {agent.fingerprint}; revert the agent or"
                    f" declare {resume.agent_fingerprint} in its compatible_with"
                )
            if resume.command is not None and resume.command.end:
                return END_HERE
            unknown = unknown_targets(resume.command, set(agent.graph.nodes))
            if unknown:
                return Refused(
                    f"the answer's goto names {', '.join(map(repr, unknown))}, which the graph"
                    f" does not have (its nodes: {', '.join(sorted(agent.graph.nodes))})",
                    "UnknownNode",
                )
            return graph_command(resume)
        if not has_checkpoint:
            if dispatch.input is None:
                return Failed("NoCheckpoint", "resume dispatched but no checkpoint exists")
            return dispatch.input.graph_input()
        if pending or not snapshot.tasks:
            return _outcome_of(snapshot, agent)
        # Work is left: nodes not yet run, or a node whose writes were stored while the
        # checkpoint after it was not (its task is listed with its result, and ``next`` looks
        # empty). Continue the crashed attempt from its last checkpoint.
        return None


async def _all(*steps: Awaitable[Any]) -> Any:
    """``asyncio.gather`` that lets every step finish before the first failure is raised, so
    none is left running unseen."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _run_config(dispatch: ExecutionDispatched, custom_headers: Mapping[str, str] | None) -> Any:
    # Custom headers reach the agent in its run config for this segment only; LangGraph does
    # not persist configurable values (a test searches the database to keep it so).
    return {
        "configurable": {
            "thread_id": dispatch.execution_id,
            "custom_headers": dict(custom_headers or {}),
        },
        "callbacks": [GraphSpans(otel_context.get_current())],
    }


def _outcome_of(snapshot: StateSnapshot, agent: LoadedAgent) -> RunOutcome:
    if snapshot.interrupts:
        interrupts = pending_interrupts(snapshot)
        reviews = interrupt_reviews(interrupts, agent.tools)
        values = _suspended_values(snapshot)
        return Suspended(
            interrupts, agent.fingerprint, reviews, agent.tools, values, list(snapshot.next)
        )
    if snapshot.next:
        # Stopped without an interrupt but with work left: only a bug in the graph does this.
        return Failed("Incomplete", f"graph stopped before {list(snapshot.next)} without interrupt")
    return Completed(to_jsonable(snapshot.values))


MAX_SUSPENDED_VALUES_BYTES = 256 * 1024
"""Beyond this a suspension goes without its state values: ``execution.suspended`` carries
them, and so does every later write of the execution document while it waits (each version in
the store's log is a whole copy; MongoDB caps a document at 16 MiB)."""


def _suspended_values(snapshot: StateSnapshot) -> dict[str, Any] | None:
    """The state values a suspension records: the JSON a completed run stores as its result,
    when that is an object within ``MAX_SUSPENDED_VALUES_BYTES``."""
    values = to_jsonable(snapshot.values)
    if not isinstance(values, dict):
        return None
    size = len(json.dumps(values, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_SUSPENDED_VALUES_BYTES:
        log.warning("suspension.values_too_large", bytes=size, max_bytes=MAX_SUSPENDED_VALUES_BYTES)
        return None
    return values
