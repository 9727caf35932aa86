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
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from services.gateway.auth import OWNERS, WRITERS, require_role
from services.gateway.errors import ExecutionNotFound, IdempotencyKeyReused
from services.gateway.feed import ExecutionFeed, Watch
from services.gateway.intake import Intake, execution_id_for
from services.gateway.langgraph.requests import RunRequest, agent_input, review_answer
from services.gateway.langgraph.views import (
    STATUSES_OF_THREAD,
    THREAD_STATUS,
    epoch_of_run,
    segment_done,
    thread_key,
    thread_of,
)
from services.gateway.problems import Problem
from services.gateway.stream import KEY_REVOKED, StreamBounds
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.principals import Reviewer
from shared.errors import InterlockError
from shared.store.api_keys import ApiKey
from shared.store.errors import StoreUnavailable
from shared.store.ports import Store
from shared.store.threads import ThreadRecord

log = structlog.get_logger(__name__)

WAIT_SECONDS = 240.0
"""How long ``runs.wait`` and ``runs.join`` hold the request before answering with the state as
it is (langgraph-sdk reads for up to 300 s). The run goes on either way."""
MAX_SEARCH = 100
SEARCH_PAGE = 100
SEARCH_PAGES = 20
"""A status search reads at most this many pages of executions: a bounded answer, never a scan
of history."""


@dataclass(frozen=True)
class Scope:
    project_id: str
    workspace_id: str


@dataclass(frozen=True)
class StartedRun:
    """A run just accepted: the thread's execution as read then, and the epoch the run is."""

    thread: ThreadRecord
    execution: Execution
    epoch: int


class LangGraphService:
    def __init__(
        self, intake: Intake, store: Store, feed: ExecutionFeed, bounds: StreamBounds
    ) -> None:
        self._intake = intake
        self._store = store
        self._feed = feed
        self.bounds = bounds

    async def agent_load_errors(self) -> dict[str, str]:
        return await self._intake.agent_load_errors()

    # --- threads --------------------------------------------------------------------------

    async def create_thread(
        self,
        scope: Scope,
        thread_id: str | None,
        metadata: dict[str, object],
        if_exists: str | None,
    ) -> tuple[ThreadRecord, bool]:
        record = ThreadRecord(
            project_id=scope.project_id,
            workspace_id=scope.workspace_id,
            thread_id=thread_id or str(uuid.uuid4()),
            metadata=dict(metadata),
        )
        # Unique per workspace: another workspace's thread of this id is not this one.
        stored, created = await self._store.threads.create(record)
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
        if record is None:
            raise Problem(
                404, "thread-not-found", "Thread not found", f"no thread {thread_id} here"
            )
        return record

    def execution_id(self, scope: Scope, thread_id: str) -> str:
        return execution_id_for(scope.project_id, scope.workspace_id, thread_key(thread_id))

    async def execution_of(self, scope: Scope, thread_id: str) -> Execution | None:
        try:
            return await self._intake.get(
                scope.project_id, scope.workspace_id, self.execution_id(scope, thread_id)
            )
        except ExecutionNotFound:
            return None

    async def thread_with_execution(
        self, scope: Scope, thread_id: str
    ) -> tuple[ThreadRecord, Execution | None]:
        record, execution = await asyncio.gather(
            self.thread(scope, thread_id), self.execution_of(scope, thread_id)
        )
        return record, execution

    async def by_ids(
        self, scope: Scope, thread_ids: list[str], status: str | None, limit: int, offset: int
    ) -> list[tuple[ThreadRecord, Execution | None]]:
        """The workspace's threads among ``thread_ids``, in the order asked (with ``status``,
        those in it): one read of the threads, then one of each found thread's execution, at
        once. An id of no thread here is left out, whether or not another workspace has one."""
        records = await self._store.threads.get_many(
            scope.project_id, scope.workspace_id, thread_ids
        )
        found = [records[t] for t in dict.fromkeys(thread_ids) if t in records]
        executions = await asyncio.gather(*(self.execution_of(scope, r.thread_id) for r in found))
        pairs = list(zip(found, executions, strict=True))
        if status is not None:
            pairs = [
                (record, execution)
                for record, execution in pairs
                if (THREAD_STATUS[execution.status] if execution else "idle") == status
            ]
        return pairs[offset : offset + min(limit, MAX_SEARCH)]

    async def search(
        self, scope: Scope, status: str | None, limit: int, offset: int
    ) -> list[tuple[ThreadRecord, Execution | None]]:
        """Threads of the workspace, newest first; with ``status``, those whose execution is in
        it (oldest first, as the executions are listed), and for ``idle`` also those not run."""
        limit = min(limit, MAX_SEARCH)
        if status is None or status == "idle":
            return await self._listed(scope, status, limit, offset)
        found = await self._by_status(scope, STATUSES_OF_THREAD[status], limit + offset)
        found = found[offset:]
        records = await self._store.threads.get_many(
            scope.project_id, scope.workspace_id, [thread for thread, _ in found]
        )
        return [(records[t], e) for t, e in found if t in records]

    async def _listed(
        self, scope: Scope, status: str | None, limit: int, offset: int
    ) -> list[tuple[ThreadRecord, Execution | None]]:
        matched: list[tuple[ThreadRecord, Execution | None]] = []
        skipped = 0
        for page in range(SEARCH_PAGES):
            records = await self._store.threads.list(
                scope.project_id, scope.workspace_id, limit=SEARCH_PAGE, offset=page * SEARCH_PAGE
            )
            executions = await asyncio.gather(
                *(self.execution_of(scope, r.thread_id) for r in records)
            )
            for record, execution in zip(records, executions, strict=True):
                busy = execution is not None and execution.status not in STATUSES_OF_THREAD["idle"]
                if status == "idle" and busy:
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
                matched.append((record, execution))
                if len(matched) == limit:
                    return matched
            if len(records) < SEARCH_PAGE:
                break
        return matched

    async def _by_status(
        self, scope: Scope, statuses: tuple[ExecutionStatus, ...], wanted: int
    ) -> list[tuple[str, Execution]]:
        found: list[tuple[str, Execution]] = []
        for status in statuses:
            cursor: str | None = None
            for _ in range(SEARCH_PAGES):
                page = await self._intake.list_executions(
                    scope.project_id, scope.workspace_id, status, SEARCH_PAGE, cursor
                )
                for execution in page.items:
                    thread = thread_of(execution)
                    if thread is not None:
                        found.append((thread, execution))
                if len(found) >= wanted or page.next_cursor is None:
                    break
                cursor = page.next_cursor
            if len(found) >= wanted:
                break
        return found[:wanted]

    # --- runs -----------------------------------------------------------------------------

    async def start(
        self,
        scope: Scope,
        thread_id: str,
        body: RunRequest,
        key: ApiKey,
        headers: dict[str, str],
        *,
        stateless: bool = False,
    ) -> StartedRun:
        """Start the thread's run with its input, or the next run with a decision. A thread
        that does not exist is created for a stateless run or when asked
        (``if_not_exists='create'``)."""
        if body.command is None:
            # Roles first: a key that may not start a run creates no thread either.
            require_role(key, "starting a run", WRITERS)
            if stateless or body.if_not_exists == "create":
                record, _ = await self.create_thread(
                    scope, thread_id, body.metadata or {}, if_exists="do_nothing"
                )
            else:
                record = await self.thread(scope, thread_id)
            return await self._invoke(scope, record, body, key, headers)
        require_role(key, "resuming a run", OWNERS)
        # A decision names the assistant it answers: the thread's execution is read (with the
        # thread, at once) to hold it to the thread's agent before anything is judged.
        if stateless or body.if_not_exists == "create":
            record, _ = await self.create_thread(
                scope, thread_id, body.metadata or {}, if_exists="do_nothing"
            )
            execution = await self.execution_of(scope, thread_id)
        else:
            record, execution = await self.thread_with_execution(scope, thread_id)
        if execution is None:
            raise not_suspended(record.thread_id)
        if execution.agent != body.assistant_id:
            raise assistant_mismatch(record.thread_id, execution.agent, body.assistant_id)
        return await self._decide(scope, record, body, key, headers)

    async def _invoke(
        self,
        scope: Scope,
        record: ThreadRecord,
        body: RunRequest,
        key: ApiKey,
        headers: dict[str, str],
    ) -> StartedRun:
        given = agent_input(body.input)
        try:
            execution = await self._intake.invoke(
                project_id=scope.project_id,
                workspace_id=scope.workspace_id,
                agent=body.assistant_id,
                agent_input=given,
                idempotency_key=thread_key(record.thread_id),
                requested_by=key.principal,
                requester_identity=key.identity,
                headers=headers,
            )
        except IdempotencyKeyReused:
            # The thread's execution differs from this run (its input or its agent): read it
            # only now, to say which.
            existing = await self.execution_of(scope, record.thread_id)
            if existing is not None and existing.agent != body.assistant_id:
                raise assistant_mismatch(
                    record.thread_id, existing.agent, body.assistant_id
                ) from None
            raise thread_has_run(record.thread_id) from None
        if execution.agent != body.assistant_id:
            raise assistant_mismatch(record.thread_id, execution.agent, body.assistant_id)
        return StartedRun(record, execution, 1)

    async def _decide(
        self,
        scope: Scope,
        record: ThreadRecord,
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
                execution_id=self.execution_id(scope, record.thread_id),
                answer=answer,
                reviewer=reviewer,
                headers=headers,
            )
        except ExecutionNotFound:
            raise not_suspended(record.thread_id) from None
        # The execution as judged, before the decision: its run is the next epoch, pending
        # until the orchestrator applies the decision (a waiter hears that).
        return StartedRun(record, outcome.judged, outcome.suspension_id + 1)

    async def run_of(
        self, scope: Scope, thread_id: str, run: str
    ) -> tuple[ThreadRecord, Execution, int]:
        """The thread, its execution and the epoch of run ``run``; 404 when it has no such run."""
        record, execution = await self.thread_with_execution(scope, thread_id)
        if execution is not None:
            epoch = epoch_of_run(execution, run, decided=await self._decided(execution))
            if epoch is not None:
                return record, execution, epoch
        raise Problem(404, "run-not-found", "Run not found", f"thread {thread_id} has no run {run}")

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
    async def watching(self, scope: Scope, thread_id: str, key: ApiKey) -> AsyncIterator[Watch]:
        """The thread's execution's activity, heard from before anything is read or started,
        held as a stream is: one of ``key``'s slots (429 past its cap, before anything starts),
        and ended when ``key`` is revoked (``watch.ended``)."""
        execution_id = self.execution_id(scope, thread_id)
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
            stopped = any(
                a.change is not None
                and (a.change.status.is_terminal or a.change.status is ExecutionStatus.SUSPENDED)
                for a in arrived
            )
            if stopped or watch.overflowed:
                execution = await self.reread(execution)
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


def not_suspended(thread_id: str) -> Problem:
    return Problem(
        409,
        "not-suspended",
        "Execution is not suspended",
        f"thread {thread_id} has no run to resume: start it with an input",
    )


def thread_has_run(thread_id: str) -> Problem:
    return Problem(
        409,
        "thread-has-run",
        "Thread has a run",
        f"thread {thread_id} already runs an input: in Interlock a thread carries one execution,"
        " resumed by decisions (command.resume); start a new thread for a new input",
    )
