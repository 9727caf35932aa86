"""The LangGraph API's work behind its routes, free of HTTP: threads, runs started with an input
or a decision, waiting for a run to stop. Runs go through ``Intake`` like the rest of the API,
so an input is an invoke and ``command.resume`` a decision with every rule of the resume route
(validation, separation of duties, one decision per suspension).

Threads belong to a workspace: the store keys them by (project, workspace, thread), so a thread id
used in another workspace is as free here as one never used. Every request held open (a wait, a
join, a stream, a cancel that waits) is bounded as the execution streams are
(services/gateway/stream.py, ``StreamBounds``): it takes one of its key's slots (429 past the
cap), ends when its key is revoked (401), and lives at most the streams' lifetime."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from services.gateway.answers import ReviewAnswer
from services.gateway.auth import OWNERS, WRITERS, require_role
from services.gateway.conversations import (
    RACES,
    Conversations,
    TurnTaken,
    WrongAgent,
    expiry,
)
from services.gateway.errors import ExecutionNotFound
from services.gateway.feed import ExecutionFeed, Watch
from services.gateway.intake import Intake
from services.gateway.langgraph.carried import advanced
from services.gateway.langgraph.requests import RunRequest, agent_input, review_answer
from services.gateway.langgraph.search import ThreadFinder
from services.gateway.langgraph.turns import THREAD_START, Fork, NewTurn, again_from
from services.gateway.langgraph.views import (
    ThreadView,
    checkpoint_of,
    checkpoint_turn,
    epoch_of_run,
    last_run_epoch,
    segment_done,
)
from services.gateway.problems import Problem
from services.gateway.stream import KEY_REVOKED, StreamBounds
from shared import webhook_urls
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.principals import Reviewer
from shared.domain.threads import ThreadBusy, plan_turn, turn_execution_id, turn_number
from shared.errors import InterlockError
from shared.events import MAX_ERASED_TURNS, AgentInput, ResumeCommand, utc_now
from shared.store.api_keys import ApiKey
from shared.store.errors import StoreUnavailable
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)

END = "__end__"
"""LangGraph's ``END`` (the gateway does not import LangGraph)."""

WAIT_SECONDS = 240.0
"""How long ``runs.wait`` and ``runs.join`` hold the request before answering with the state as
it is (langgraph-sdk reads for up to 300 s). The run goes on either way."""


@dataclass(frozen=True)
class Scope:
    project_id: str
    workspace_id: str


@dataclass(frozen=True)
class StartedRun:
    """A run just accepted: its turn's execution as read then, and the epoch the run is."""

    thread: ThreadRecord
    execution: Execution
    epoch: int


class LangGraphService:
    def __init__(
        self,
        intake: Intake,
        store: Store,
        feed: ExecutionFeed,
        bounds: StreamBounds,
        conversations: Conversations | None = None,
        *,
        webhooks_private: bool = False,
    ) -> None:
        self._webhooks_private = webhooks_private
        self._intake = intake
        self._store = store
        self._feed = feed
        self.bounds = bounds
        self.conversations = conversations or Conversations(intake, store)
        self.finder = ThreadFinder(intake, store, self.conversations, self.view)

    @property
    def intake(self) -> Intake:
        return self._intake

    @property
    def store(self) -> Store:
        return self._store

    # --- threads --------------------------------------------------------------------------

    async def create_thread(
        self,
        scope: Scope,
        thread_id: str | None,
        metadata: dict[str, object],
        if_exists: str | None,
        ttl_minutes: float | None = None,
    ) -> tuple[ThreadRecord, bool]:
        record = self.conversations.new_thread(
            scope.project_id,
            scope.workspace_id,
            thread_id or str(uuid.uuid4()),
            metadata,
            ttl_minutes,
        )
        # Unique per workspace: another workspace's thread of this id is not this one.
        stored, created = await self._store.threads.create(record)
        if stored.deleted:
            raise thread_deleted(record.thread_id)
        if not created and if_exists != "do_nothing":
            raise Problem(
                409,
                "thread-exists",
                "Thread exists",
                f"thread {record.thread_id} exists already (send if_exists='do_nothing' to"
                " get it back)",
            )
        return stored, created

    async def thread(self, scope: Scope, thread_id: str) -> ThreadRecord:
        record = await self._store.threads.get(scope.project_id, scope.workspace_id, thread_id)
        if record is None or record.deleted:
            raise thread_not_found(thread_id)
        return record

    async def delete_thread(self, scope: Scope, thread_id: str, key: ApiKey) -> None:
        """Delete the thread (``threads.delete``): a tombstone at once, so it is gone for every
        reader and its id starts nothing more, then its turns erased by the orchestrator
        (services/orchestrator/thread_erasure.py). A thread with a turn that has not ended is
        busy: nothing is deleted from under a run or a review.

        Deleting a thread deleted already is a 404, as LangGraph answers, but asks for the
        erasure again: the request that made the tombstone may have failed to publish it (a
        503 the client retries), and erasing twice is harmless."""
        require_role(key, "deleting a thread", OWNERS)
        record = await self._store.threads.get(scope.project_id, scope.workspace_id, thread_id)
        if record is None:
            raise thread_not_found(thread_id)
        latest = await self.conversations.latest(record)
        last = 0 if latest is None else turn_number(latest)
        if last > MAX_ERASED_TURNS:
            raise Problem(
                422,
                "thread-too-long",
                "Thread too long to delete",
                f"thread {thread_id} has {last} turns; one deletion erases at most"
                f" {MAX_ERASED_TURNS}",
            )
        if not record.deleted:
            await self._check_all_ended(record, last)
            await self._store.threads.mark_deleted(
                scope.project_id, scope.workspace_id, thread_id, utc_now()
            )
        await self._intake.erase_thread(
            project_id=scope.project_id,
            workspace_id=scope.workspace_id,
            thread_id=thread_id,
            execution_ids=[turn_execution_id_of(record, n) for n in range(1, last + 1)],
            requested_by=key.principal,
        )
        if record.deleted:
            raise thread_not_found(thread_id)
        log.info("thread.deleted", thread_id=thread_id, turns=last)

    async def _check_all_ended(self, record: ThreadRecord, last: int) -> None:
        """Raise 409 ``thread-busy`` unless every turn up to ``last`` ended (a turn queued
        behind a review may have been cancelled while an earlier one still waits)."""
        turns = await asyncio.gather(
            *(self.conversations.turn(record, n) for n in range(1, last + 1))
        )
        unended = [t for t in turns if t is not None and not t.status.is_terminal]
        if unended:
            raise Problem(
                409,
                "thread-busy",
                "Thread is busy",
                f"thread {record.thread_id} has a run {unended[0].status.value}: cancel it"
                " (POST .../runs/{run_id}/cancel) or let it finish, then delete the thread",
                execution_id=unended[0].execution_id,
            )

    async def view(self, record: ThreadRecord, latest: Execution | None) -> ThreadView:
        """The thread as LangGraph shows it: its latest turn that ran (a turn queued behind a
        review leaves the review in view, to be answered), and the turn that one started from
        when it has no values of its own yet."""
        shown = await self.conversations.answerable(latest)
        return ThreadView(record, shown, await self.earlier_of(shown))

    async def earlier_of(self, execution: Execution | None) -> Execution | None:
        """The turn ``execution`` started from, when it has no values of its own to show."""
        if execution is None or execution.status is ExecutionStatus.COMPLETED:
            return None
        if execution.suspension is not None and execution.suspension.values is not None:
            return None
        if execution.stopped_values is not None:
            return None
        return await self.conversations.base(execution)

    async def update_thread(
        self,
        scope: Scope,
        thread_id: str,
        metadata: dict[str, object],
        ttl_minutes: float | None = None,
    ) -> ThreadView:
        """Merge ``metadata`` into the thread's (LangGraph's ``threads.update``); with
        ``ttl_minutes``, the thread expires that long from now (and from each new turn)."""
        record = await self.thread(scope, thread_id)
        updated = await self._store.threads.set_metadata(
            scope.project_id, scope.workspace_id, thread_id, {**record.metadata, **metadata}
        )
        if updated is not None and ttl_minutes is not None:
            updated = await self._store.threads.set_ttl(
                scope.project_id,
                scope.workspace_id,
                thread_id,
                ttl_minutes,
                expiry(ttl_minutes, utc_now()),
            )
        if updated is None or updated.deleted:
            raise thread_not_found(thread_id)
        return await self.view(updated, await self.conversations.latest(updated))

    async def history(self, scope: Scope, thread_id: str, limit: int) -> list[ThreadView]:
        """The thread's states, newest first: its latest turn, then the turn that one started
        from, and so on (the branch it is on: a turn rolled back or forked away from is not
        on it). One state per turn, as it stands or ended."""
        record, latest = await self.latest_of(scope, thread_id)
        views: list[ThreadView] = []
        execution = latest
        while execution is not None and len(views) < limit:
            base = await self.conversations.base(execution)
            views.append(ThreadView(record, execution, base))
            execution = base
        return views

    async def thread_view(self, scope: Scope, thread_id: str) -> ThreadView:
        record = await self.thread(scope, thread_id)
        return await self.view(record, await self.conversations.latest(record))

    async def latest_of(
        self, scope: Scope, thread_id: str
    ) -> tuple[ThreadRecord, Execution | None]:
        record = await self.thread(scope, thread_id)
        return record, await self.conversations.latest(record)

    # --- runs -----------------------------------------------------------------------------

    @asynccontextmanager
    async def start(
        self,
        scope: Scope,
        thread_id: str,
        body: RunRequest,
        key: ApiKey,
        headers: dict[str, str],
        *,
        stateless: bool = False,
        watch: bool = False,
    ) -> AsyncIterator[tuple[StartedRun, Watch | None]]:
        """Start a run: with an input the thread's next turn (after its busy turn, by the
        request's ``multitask_strategy``), with a decision the next run of the turn waiting for
        it. A thread that does not exist is created for a stateless run or when asked
        (``if_not_exists='create'``). With ``watch``, the run's execution is watched from
        before it starts (nothing it does falls before the watch), for as long as the block."""
        if body.webhook is not None:
            await self.check_webhook(body.webhook)
        if body.command is None:
            # Roles first: a key that may not start a run creates no thread either.
            require_role(key, "starting a run", WRITERS)
            record, created = await self._thread_for(scope, thread_id, body, stateless)
            fork = await self.forked_from(
                record, body.fork_checkpoint(), head_continues=body.input is not None
            )
            turn = (
                NewTurn(
                    agent=body.assistant_id,
                    given=agent_input(body.input),
                    policy=body.multitask_strategy or "enqueue",
                    base=fork.base if fork else None,
                    fork=fork is not None,
                    empty=created,
                )
                if body.input is not None
                else await again_from(self, record, body, fork)
            )
            turn = dataclasses.replace(turn, webhook=body.webhook)
            async with self._new_turn(scope, record, key, headers, watch, turn) as started:
                yield started
            return
        require_role(key, "resuming a run", OWNERS)
        record, created = await self._thread_for(scope, thread_id, body, stateless)
        if created:
            raise not_suspended(record.thread_id)
        # A decision names the assistant it answers: held to the thread's agent before
        # anything is judged.
        execution = await self._waiting(record)
        if execution is None:
            raise not_suspended(record.thread_id)
        if execution.agent != body.assistant_id:
            raise assistant_mismatch(record.thread_id, execution.agent, body.assistant_id)
        answers_head_of(record, execution, body.fork_checkpoint())
        async with self._watch_if(scope, execution.execution_id, key, watch) as watching:
            yield await self._decide(scope, record, execution, body, key, headers), watching

    async def check_webhook(self, url: str) -> None:
        """A 422 for a webhook that may not be called (shared/webhook_urls.py), as LangGraph's
        server answers one, before anything is started."""
        try:
            await webhook_urls.check(url, allow_private=self._webhooks_private)
        except webhook_urls.WebhookUrlRefused as refused:
            raise Problem(422, "webhook-refused", "Webhook refused", str(refused)) from None

    async def _waiting(self, record: ThreadRecord) -> Execution | None:
        """The turn a decision answers, in one read when the turn the thread's hint names waits
        for a review: that turn's head. A turn after it that the hint has not caught up with
        yet can only be queued behind that review or replacing it, and a decision answers the
        review then too (``Conversations.answerable``). Any other head is read past: where the
        thread stands, read in full."""
        if record.turns > 0:
            try:
                hinted = await self._intake.get(
                    record.project_id,
                    record.workspace_id,
                    turn_execution_id_of(record, record.turns),
                    min_epoch=0,
                )
            except ExecutionNotFound:
                hinted = None
            if hinted is not None and hinted.status is ExecutionStatus.SUSPENDED:
                return hinted
        return await self.conversations.answerable(await self.conversations.latest(record))

    async def _thread_for(
        self, scope: Scope, thread_id: str, body: RunRequest, stateless: bool
    ) -> tuple[ThreadRecord, bool]:
        """The run's thread, and whether this request just created it (it has no turn)."""
        if stateless or body.if_not_exists == "create":
            return await self.create_thread(
                scope, thread_id, body.metadata or {}, if_exists="do_nothing"
            )
        return await self.thread(scope, thread_id), False

    @asynccontextmanager
    async def _watch_if(
        self, scope: Scope, execution_id: str, key: ApiKey, watch: bool
    ) -> AsyncIterator[Watch | None]:
        if not watch:
            yield None
            return
        async with self.watching(scope, execution_id, key) as watching:
            yield watching

    @asynccontextmanager
    async def _new_turn(
        self,
        scope: Scope,
        record: ThreadRecord,
        key: ApiKey,
        headers: dict[str, str],
        watch: bool,
        turn: NewTurn,
    ) -> AsyncIterator[tuple[StartedRun, Watch | None]]:
        """Start the thread's next turn as ``turn`` says, planned again while other requests
        take the turn planned (at most ``RACES`` times).

        A thread this request created, or whose hint says it started no turn, has its first
        turn planned without a read: starting it is an insert under the turn's key, and a turn
        1 already there (the hint trails a turn being started, or a note that failed) refuses
        it, since every request's input is its own (``ThreadTurn.request_id``): then the
        thread's turns are read and the input planned after them (``TurnTaken``)."""
        unread = turn.empty or record.turns == 0
        for _ in range(RACES):
            try:
                plan = (
                    plan_turn(None, turn.policy)
                    if unread
                    else await self.conversations.plan(record, turn.agent, turn.policy)
                )
            except WrongAgent as wrong:
                raise assistant_mismatch(record.thread_id, wrong.agent, turn.agent) from None
            except ThreadBusy as busy:
                raise thread_busy(record.thread_id, busy.latest) from None
            if plan.cancels is not None:
                # The busy turn is cancelled (a review it waits for ends with it): what
                # Interlock's cancel route needs.
                require_role(key, f"a run with multitask_strategy={turn.policy}", OWNERS)
            if turn.base is not None or turn.fork:
                plan = dataclasses.replace(plan, base=turn.base)
            target = turn_execution_id_of(record, plan.turn)
            async with self._watch_if(scope, target, key, watch) as watching:
                try:
                    execution = await self.conversations.start(
                        record,
                        plan,
                        agent=turn.agent,
                        given=turn.given,
                        policy=turn.policy,
                        requested_by=key.principal,
                        requester_identity=key.identity,
                        headers=headers,
                        kind=turn.kind,
                        as_node=turn.as_node,
                        webhook=turn.webhook,
                    )
                except TurnTaken:
                    unread = False
                    continue
                yield StartedRun(record, execution, 1), watching
                return
        raise thread_busy(record.thread_id, None)

    async def forked_from(
        self, record: ThreadRecord, checkpoint_id: str | None, *, head_continues: bool = False
    ) -> Fork | None:
        """The turn a run from ``checkpoint_id`` starts from (a fork: a new branch of the
        thread, its history that turn's and those before it); None without one. A checkpoint is
        a turn's state as the thread's history lists it: a turn that moved on since (a later
        run of it) is not that state any more. The thread's start (``epoch-0``, its first
        turn's parent) never moves: a fork from it starts from nothing. With
        ``head_continues``, the thread's head (its latest turn as it stands) is no fork: an
        input from it is the thread's next turn, as LangGraph runs it; ``useStream`` names the
        head on every submit once it has read the history."""
        if checkpoint_id is None:
            return None
        named = checkpoint_turn(checkpoint_id)
        if named == THREAD_START:
            return Fork(None)
        turn, following = None, None
        if named is not None and head_continues:
            turn, following = await asyncio.gather(
                self.conversations.turn(record, named[0]),
                self.conversations.turn(record, named[0] + 1),
            )
        elif named is not None:
            turn = await self.conversations.turn(record, named[0])
        if named is None or turn is None:
            raise Problem(
                404,
                "checkpoint-not-found",
                "Checkpoint not found",
                f"thread {record.thread_id} has no checkpoint {checkpoint_id!r} (take one from"
                " its history)",
            )
        if head_continues and following is None and turn.epoch == named[1]:
            return None
        if turn.epoch != named[1] or not turn.status.is_terminal:
            raise Problem(
                409,
                "checkpoint-moved",
                "Checkpoint moved on",
                f"checkpoint {checkpoint_id!r} is turn {named[0]} as it was; that turn has run"
                " on since, or still runs: fork from a checkpoint of the thread's history now",
            )
        return Fork(turn.execution_id)

    async def update_state(
        self,
        scope: Scope,
        thread_id: str,
        values: dict[str, object],
        as_node: str | None,
        checkpoint_id: str | None,
        key: ApiKey,
        headers: dict[str, str],
    ) -> Execution:
        """A person writes the thread's state (``threads.update_state``): a turn of its own
        that runs nothing, audited with who and what (its input is the values), answered once
        written. Refused on a busy thread: a run under way, or a review waiting, owns the
        state; but no values as ``__end__`` on a thread waiting for a review answers it
        (``_end_review``)."""
        record, latest = await self.latest_of(scope, thread_id)
        if latest is None:
            raise Problem(
                409,
                "thread-not-run",
                "Thread has not run",
                f"thread {thread_id} has no state to update yet: start it with a run",
            )
        if not values and as_node == END and checkpoint_id is None:
            waiting = await self.conversations.answerable(latest)
            if waiting is not None and waiting.status is ExecutionStatus.SUSPENDED:
                return await self._end_review(scope, record, waiting, key, headers)
        fork = await self.forked_from(record, checkpoint_id)
        turn = NewTurn(
            agent=latest.agent,
            given=agent_input(values) if values else AgentInput(state={}),
            policy="reject",
            kind="update",
            as_node=as_node,
            base=fork.base if fork else None,
            fork=fork is not None,
        )
        async with self._new_turn(scope, record, key, headers, True, turn) as (started, watch):
            assert watch is not None
            return await self.wait(watch, started.execution, None)

    async def _end_review(
        self,
        scope: Scope,
        record: ThreadRecord,
        waiting: Execution,
        key: ApiKey,
        headers: dict[str, str],
    ) -> Execution:
        """LangGraph's ``update_state(None, as_node=END)`` on an interrupted thread drops its
        interrupts and keeps its state (Agent Inbox's "mark as resolved"). Here it answers the
        review (``end``): a decision under the resume route's rules, recorded with who gave it,
        that ends the turn where it stands. Answered once the turn ended."""
        require_role(key, "answering a review", OWNERS)
        answer = ReviewAnswer(command=ResumeCommand(end=True))
        async with self.watching(scope, waiting.execution_id, key) as watch:
            try:
                outcome = await self._intake.decide(
                    project_id=scope.project_id,
                    workspace_id=scope.workspace_id,
                    execution_id=waiting.execution_id,
                    answer=answer,
                    reviewer=key.as_reviewer(),
                    headers=headers,
                )
            except ExecutionNotFound:
                raise not_suspended(record.thread_id) from None
            return await self.wait(watch, outcome.judged, None)

    async def copy_thread(
        self, scope: Scope, thread_id: str, key: ApiKey, headers: dict[str, str]
    ) -> ThreadView:
        """A new thread holding this one's state (``threads.copy``): its first turn starts from
        this one's latest and runs nothing."""
        record, latest = await self.latest_of(scope, thread_id)
        copy, _ = await self.create_thread(
            scope, None, dict(record.metadata), None, record.ttl_minutes
        )
        if latest is None:
            return ThreadView(copy, None)
        source = await self.conversations.answerable(latest)
        if source is None or not source.status.is_terminal:
            raise thread_busy(thread_id, latest)
        turn = NewTurn(
            agent=latest.agent,
            given=AgentInput(state={}),
            policy="reject",
            kind="update",
            base=source.execution_id,
        )
        async with self._new_turn(scope, copy, key, headers, True, turn) as (started, watch):
            assert watch is not None
            done = await self.wait(watch, started.execution, None)
        return await self.view(copy, done)

    async def _decide(
        self,
        scope: Scope,
        record: ThreadRecord,
        execution: Execution,
        body: RunRequest,
        key: ApiKey,
        headers: dict[str, str],
    ) -> StartedRun:
        assert body.command is not None
        answer = review_answer(body.command)
        reviewer: Reviewer = key.as_reviewer()
        try:
            # Intake reads the execution again to judge the answer against its latest state.
            outcome = await self._intake.decide(
                project_id=scope.project_id,
                workspace_id=scope.workspace_id,
                execution_id=execution.execution_id,
                answer=answer,
                reviewer=reviewer,
                headers=headers,
                webhook=body.webhook,
            )
        except ExecutionNotFound:
            raise not_suspended(record.thread_id) from None
        # The execution as judged, before the decision: its run is the next epoch, pending
        # until the orchestrator applies the decision (a waiter hears that).
        return StartedRun(record, outcome.judged, outcome.suspension_id + 1)

    async def run_of(
        self, scope: Scope, thread_id: str, run: str
    ) -> tuple[ThreadRecord, Execution, int]:
        """The thread, the turn that made run ``run`` and the run's epoch; 404 when the thread
        has no such run. Turns are searched from the latest back (the run asked for is nearly
        always the latest turn's)."""
        record, latest = await self.latest_of(scope, thread_id)
        execution = latest
        while execution is not None:
            epoch = epoch_of_run(execution, run, decided=await self._decided(execution))
            if epoch is not None:
                return record, execution, epoch
            number = turn_number(execution)
            execution = await self.conversations.turn(record, number - 1) if number > 1 else None
        raise Problem(404, "run-not-found", "Run not found", f"thread {thread_id} has no run {run}")

    async def runs(
        self, scope: Scope, thread_id: str, limit: int, offset: int
    ) -> list[tuple[Execution, int]]:
        """The thread's runs, newest first: each turn's epochs, the latest turn's first."""
        record, latest = await self.latest_of(scope, thread_id)
        listed: list[tuple[Execution, int]] = []
        execution = latest
        while execution is not None and len(listed) < offset + limit:
            last = last_run_epoch(execution, decided=await self._decided(execution))
            listed.extend((execution, epoch) for epoch in range(last, 0, -1))
            number = turn_number(execution)
            execution = await self.conversations.turn(record, number - 1) if number > 1 else None
        return listed[offset : offset + limit]

    async def _decided(self, execution: Execution) -> bool:
        """Has an answer been accepted for the current suspension, not yet applied: a decision
        that took it, or an approval toward one that needs several (its run is pending)?"""
        suspension = execution.suspension
        if execution.status is not ExecutionStatus.SUSPENDED or suspension is None:
            return False
        holder, approvals = await asyncio.gather(
            self._store.decisions.holder(execution.execution_id, suspension.suspension_id),
            self._store.approvals.list(execution.execution_id, suspension.suspension_id),
        )
        return holder is not None or bool(approvals)

    @asynccontextmanager
    async def watching(self, scope: Scope, execution_id: str, key: ApiKey) -> AsyncIterator[Watch]:
        """An execution's activity, heard from before anything is read or started, held as a
        stream is: one of ``key``'s slots (429 past its cap, before anything starts), and ended
        when ``key`` is revoked (``watch.ended``)."""
        with (
            self.bounds.slot(key),
            self._feed.watch(scope.project_id, execution_id) as watch,
            self.bounds.guarding(key, watch),
        ):
            async with self._feed.listening():
                yield watch

    async def reread(self, execution: Execution) -> Execution:
        return await self._intake.get(
            execution.project_id, execution.workspace_id, execution.execution_id
        )

    async def wait(
        self, watch: Watch, execution: Execution, epoch: int | None, seconds: float = WAIT_SECONDS
    ) -> Execution:
        """The execution once the run of ``epoch`` stopped (with None: once it ended), or as it
        is after ``seconds`` (at most the streams' lifetime). Pushed: the store is read again
        only when a change says the execution stopped. A watch ended by its key's re-check is
        a refusal (``held_refusal``), never the state."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bounds.lifetime(seconds)
        while not segment_done(execution, epoch):
            if watch.ended is not None:
                raise held_refusal(watch.ended)
            left = deadline - loop.time()
            if left <= 0:
                return execution
            arrived = await watch.next(left)
            if watch.ended is not None:
                raise held_refusal(watch.ended)
            # A change that stops the run carries the execution: no read (carried.py).
            heard = None if watch.overflowed else advanced(execution, arrived)
            execution = heard or await self.reread(execution)
        return execution

    async def cancel(self, scope: Scope, execution: Execution, key: ApiKey) -> Execution:
        require_role(key, "cancelling a run", OWNERS)
        return await self._intake.cancel(
            project_id=scope.project_id,
            workspace_id=scope.workspace_id,
            execution_id=execution.execution_id,
            reason="cancelled through the LangGraph API",
            requested_by=key.principal,
        )


def held_refusal(why: str) -> InterlockError:
    """What a wait or a join answers when its key's re-check ended it: 401 for a key revoked
    since it authenticated the request; when the key could not be read again, the store's
    transient failure (503 with Retry-After, as any request the store fails)."""
    if why == KEY_REVOKED:
        return Problem(
            401,
            "unauthenticated",
            "Authentication required",
            f"{why}: this request was authenticated by a key revoked since",
            headers={"WWW-Authenticate": 'Bearer realm="interlock"'},
        )
    return StoreUnavailable(why)


def assistant_mismatch(thread_id: str, agent: str, asked: str) -> Problem:
    return Problem(
        409,
        "assistant-mismatch",
        "Assistant does not match the thread",
        f"thread {thread_id} runs assistant {agent!r}; this run names {asked!r}: send"
        f" assistant_id {agent!r} (a thread carries one agent's execution)",
        thread_assistant=agent,
        assistant_id=asked,
    )


def thread_not_found(thread_id: str) -> Problem:
    return Problem(404, "thread-not-found", "Thread not found", f"no thread {thread_id} here")


def thread_deleted(thread_id: str) -> Problem:
    """A deleted thread's id is never a thread again (shared/store/threads.py, ``deleted_at``)."""
    return Problem(
        409,
        "thread-deleted",
        "Thread was deleted",
        f"thread {thread_id} was deleted, and a deleted thread's id is not reused: create the"
        " thread under another id (or let the server choose one)",
    )


def not_suspended(thread_id: str) -> Problem:
    return Problem(
        409,
        "not-suspended",
        "Execution is not suspended",
        f"thread {thread_id} has no run to resume: start it with an input",
    )


def answers_head_of(record: ThreadRecord, waiting: Execution, checkpoint_id: str | None) -> None:
    """A decision answers the review the thread waits in now. ``useStream`` names the thread's
    head checkpoint beside every command (it is that review's); any other checkpoint would be a
    review of the past, which Interlock does not answer (a fork starts with an input)."""
    if checkpoint_id is None:
        return
    head = checkpoint_of(record.thread_id, waiting)["checkpoint_id"]
    if checkpoint_id != head:
        raise Problem(
            409,
            "checkpoint-moved",
            "Checkpoint is not the review's",
            f"a command answers the review thread {record.thread_id} waits in now, at"
            f" checkpoint {head!r}; {checkpoint_id!r} is another state of its history (send the"
            " command without a checkpoint, or fork from that checkpoint with an input)",
        )


def thread_busy(thread_id: str, latest: Execution | None) -> Problem:
    """LangGraph's answer to a run on a busy thread with ``multitask_strategy='reject'``."""
    state = "is busy" if latest is None else f"has a run {latest.status.value}"
    return Problem(
        409,
        "thread-busy",
        "Thread is busy",
        f"thread {thread_id} {state}: wait for it to finish, answer its review, or choose"
        " another multitask_strategy (enqueue, interrupt or rollback)",
    )


def turn_execution_id_of(record: ThreadRecord, turn: int) -> str:
    return turn_execution_id(record.project_id, record.workspace_id, record.thread_id, turn)
