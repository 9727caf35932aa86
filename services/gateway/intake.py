"""What the gateway does behind its routes, free of HTTP: accept invocations and decisions.

The gateway stores the ``pending`` execution before publishing ``execution.requested``, so a GET
right after the 202 finds it; the orchestrator takes it from there. For a decision it takes the
suspension's one decision claim before publishing ``decision.submitted``, so of concurrent
reviewers exactly one gets a 202 and the others a 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

import structlog
from pydantic import BaseModel

from services.gateway.answers import (
    DecisionOutcome,
    ReviewAnswer,
    conflict_with,
    decision_event,
    resolve,
)
from services.gateway.errors import (
    ExecutionNotFound,
    IdempotencyKeyReused,
    UnknownAgent,
    UnknownInputKeys,
)
from shared import tracing
from shared.agents import AgentRegistry, ReviewRules
from shared.bus import EventPublisher
from shared.domain.cancellation import check_cancellable
from shared.domain.execution import (
    Execution,
    ExecutionStatus,
    RunWebhook,
    new_pending_execution,
)
from shared.domain.judging import approval_of, approvals_required, approving, check_may_decide
from shared.domain.principals import Reviewer
from shared.domain.threads import execution_id_for, turn_execution_id
from shared.events import (
    MAX_STORED_AS_CHARS,
    AgentInput,
    CancelRequested,
    DecisionSubmitted,
    ExecutionRequested,
    ThreadDeleteRequested,
    encode_event,
    utc_now,
)
from shared.quorum import record_and_count
from shared.senders import MessageSigner
from shared.store.agent_versions import AgentVersionCheck
from shared.store.approvals import Approval
from shared.store.ports import Claim, Page, Store
from shared.store.progress import ProgressEntry
from shared.topics import Topics

log = structlog.get_logger(__name__)


def fingerprint(agent: str, agent_input: AgentInput) -> str:
    canonical = json.dumps(
        {"agent": agent, "input": agent_input.model_dump(mode="json")}, sort_keys=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


PUBLISH_TIMEOUT_SECONDS = 10.0
"""How long a request waits for the broker to acknowledge its event before answering 503."""


class BoundedPublisher:
    """A publisher that gives up after ``PUBLISH_TIMEOUT_SECONDS`` with ``TimeoutError`` (a 503
    with ``Retry-After``). With the broker down, the Kafka client retries until it is back: the
    chaos suite saw requests hang for the whole of a 60-second outage. The event may still be
    delivered later, which a 503 allows (the client retries with its idempotency key; a decision
    keeps its claim and its retry is told which decision won)."""

    def __init__(self, inner: EventPublisher, timeout: float = PUBLISH_TIMEOUT_SECONDS) -> None:
        self._inner = inner
        self._timeout = timeout

    async def publish(
        self, event: BaseModel, topic: str, *, key: str, headers: dict[str, str] | None = None
    ) -> None:
        async with asyncio.timeout(self._timeout):
            await self._inner.publish(event, topic, key=key, headers=headers)


class Intake:
    def __init__(
        self,
        *,
        store: Store,
        publisher: EventPublisher,
        topics: Topics,
        registry: AgentRegistry,
        signer: MessageSigner,
        agent_versions: AgentVersionCheck | None = None,
    ) -> None:
        self._store = store
        self._publisher = BoundedPublisher(publisher)
        self._topics = topics
        self._registry = registry
        # Every decision published is signed: the orchestrator applies no other (shared/senders).
        self._signer = signer
        # The early 409 for changed agent code; the sandbox refuses such a resume anyway.
        self._agent_versions = agent_versions or AgentVersionCheck(store.agent_versions)

    async def invoke(
        self,
        *,
        project_id: str,
        workspace_id: str,
        agent: str,
        agent_input: AgentInput,
        idempotency_key: str | None,
        requested_by: str | None,
        headers: dict[str, str] | None = None,
        requester_identity: str | None = None,
        webhook: str | None = None,
    ) -> Execution:
        await self.check_request(agent, agent_input)
        execution_id = execution_id_for(project_id, workspace_id, idempotency_key)
        event = ExecutionRequested(
            event_id=f"{execution_id}:requested",
            execution_id=execution_id,
            correlation_id=execution_id,
            project_id=project_id,
            workspace_id=workspace_id,
            agent=agent,
            input=agent_input,
            idempotency_key=idempotency_key,
            requested_by=requested_by,
            requester_identity=requester_identity,
        )
        print_ = fingerprint(agent, agent_input)
        pending = new_pending_execution(event, print_, tracing.current_carrier())
        if webhook is not None:
            pending = pending.model_copy(update={"webhooks": [RunWebhook(epoch=1, url=webhook)]})
        execution, created = await self._store.executions.create(pending)
        if not created and execution.request_fingerprint != print_:
            raise IdempotencyKeyReused(
                f"idempotency key {idempotency_key!r} was used for a different request"
            )
        if created or (execution.status is ExecutionStatus.PENDING and execution.epoch == 0):
            # A retry of an invoke whose publish failed publishes again; the orchestrator
            # treats the repeat as the same request. A retry first takes the request back from
            # the sweep that abandons undelivered ones, so it is not ended while delivered.
            if execution.undelivered_since is not None:
                execution = await self._mark_undelivered(execution, None)
                if execution.status is not ExecutionStatus.PENDING:
                    return execution  # abandoned already: the client invokes anew
            try:
                await self._publisher.publish(
                    carrying(event, execution), self._topics.requested, key=execution_id,
                    headers=headers,
                )  # fmt: skip
            except Exception:
                # The client is answered 503 and retries; if it never does, the orchestrator
                # abandons the execution (services/orchestrator/abandoned.py).
                with contextlib.suppress(Exception):
                    await self._mark_undelivered(execution, utc_now())
                raise
        log.info("invoke.accepted", execution_id=execution_id, created=created, agent=agent)
        return execution

    async def check_request(self, agent: str, agent_input: AgentInput) -> None:
        """Raise ``UnknownAgent`` or ``UnknownInputKeys`` unless ``agent`` may run
        ``agent_input``: what an invoke checks first, and a cron when it is made."""
        if self._registry.get(agent) is None:
            raise UnknownAgent(agent, self._registry.names())
        updates = agent_input.turn is not None and agent_input.turn.kind == "update"
        if agent_input.state is not None and not updates:
            # A state update writes the graph's channels, not its input: any key it has.
            await self._check_input_keys(agent, agent_input.state)

    async def _check_input_keys(self, agent: str, state: Mapping[str, object]) -> None:
        refusing = await self._agent_versions.refusing_input(agent, state)
        if refusing is not None:
            raise UnknownInputKeys(
                agent, refusing.unknown_input_keys(state), list(refusing.input_keys or [])
            )

    async def _mark_undelivered(self, execution: Execution, since: datetime | None) -> Execution:
        """Set (or with None clear) ``undelivered_since`` on a never-dispatched execution by
        compare-and-set; returns the stored execution (unchanged if it moved on)."""
        for _ in range(5):
            if execution.status is not ExecutionStatus.PENDING or execution.epoch != 0:
                return execution
            marked = execution.model_copy(update={"undelivered_since": since})
            stored = await self._store.executions.replace(execution, marked)
            if stored is not None:
                return stored
            reloaded = await self._store.executions.get(
                execution.project_id, execution.execution_id
            )
            if reloaded is None:
                return execution
            execution = reloaded
        return execution

    async def get(
        self,
        project_id: str,
        workspace_id: str,
        execution_id: str,
        *,
        min_epoch: int | None = None,
    ) -> Execution:
        """The newest version, or with ``min_epoch`` any of that epoch or later (see
        ``ExecutionStore.get``). Raises ExecutionNotFound."""
        execution = await self._store.executions.get(project_id, execution_id, min_epoch=min_epoch)
        if execution is None or execution.workspace_id != workspace_id:
            raise ExecutionNotFound(execution_id)
        return execution

    async def _to_decide(
        self, project_id: str, workspace_id: str, execution_id: str, answer: ReviewAnswer
    ) -> Execution:
        """The version a decision is judged against, in one read when it can be.

        An answer naming its suspension (its generation, the epoch that suspended) needs no
        version older than that: any version of that epoch or later tells whether it is still
        the one waiting (one read while the head is that new). An answer naming none is judged
        on the head alone when the head shows a suspension: a version past it (a deadline
        firing at this moment, another reviewer's decision applied, whose head write is in
        flight while its writer publishes) is the same race as an answer a moment earlier: the
        suspension's one claim and the orchestrator order the two. Any other head is read past
        before the answer is refused, so no refusal rests on a trailing head (a suspension
        whose head write is still in flight is found in the log)."""
        if answer.generation is not None:
            return await self.get(
                project_id, workspace_id, execution_id, min_epoch=answer.generation
            )
        head = await self.get(project_id, workspace_id, execution_id, min_epoch=0)
        if head.status is ExecutionStatus.SUSPENDED:
            return head
        return await self.get(project_id, workspace_id, execution_id)

    async def agent_load_errors(self) -> dict[str, str]:
        """The registered agents the sandboxes reported they cannot load, with why."""
        return await self._store.agent_versions.unloadable()

    async def progress_after(self, execution: Execution, key: str) -> list[ProgressEntry]:
        return await self._store.progress.after(execution.project_id, execution.execution_id, key)

    async def list_executions(
        self,
        project_id: str,
        workspace_id: str,
        status: ExecutionStatus | None,
        limit: int,
        cursor: str | None,
    ) -> Page:
        return await self._store.executions.list(
            project_id, workspace_id, status=status, limit=limit, cursor=cursor
        )

    async def decide(
        self,
        *,
        project_id: str,
        workspace_id: str,
        execution_id: str,
        answer: ReviewAnswer,
        reviewer: Reviewer | None,
        headers: dict[str, str] | None = None,
        webhook: str | None = None,
    ) -> DecisionOutcome:
        """Validate, claim the suspension's decision and publish it. Raises ExecutionNotFound,
        DecisionError (not suspended, stale, not allowed, invalid, agent changed),
        SeparationOfDuties or DecisionConflict; nothing is stored or published unless the
        answer is valid and the reviewer may give it."""
        execution = await self._to_decide(project_id, workspace_id, execution_id, answer)
        resolution = resolve(execution, answer)
        await self._agent_versions.check(execution)
        assert execution.suspension is not None
        suspension_id = execution.suspension.suspension_id
        spec = self._registry.get(execution.agent)
        rules = spec.review if spec is not None else ReviewRules()
        if reviewer is not None:
            check_may_decide(reviewer, execution, rules, answer)
        needed = approvals_required(execution, rules)
        outcome = DecisionOutcome(resolution, suspension_id, None, [], needed, execution)
        if needed > 1 and approving(answer):
            approval = approval_of(execution, suspension_id, answer, resolution, reviewer)
            approvers, discounted = await self._approvals_with(approval, reviewer)
            outcome = replace(outcome, approvals=approvers, discounted=discounted)
            if outcome.approvals_counted < needed:
                log.info(
                    "approval.recorded",
                    execution_id=execution_id,
                    approvals=len(approvers),
                    discounted=len(discounted),
                )
                return outcome
        event = decision_event(
            execution, suspension_id, answer, resolution, reviewer, outcome, webhook
        )
        await self._claim(event, suspension_id)
        await self._publish_decision(event, headers)
        log.info("decision.accepted", execution_id=execution_id, decision=resolution.summary)
        return replace(outcome, event=event)

    async def _approvals_with(
        self, approval: Approval, reviewer: Reviewer | None
    ) -> tuple[list[Approval], list[str]]:
        """Record ``approval``; the approvals of the same answer that count, and why the others
        no longer do (this request's own key was just checked)."""
        just_checked = reviewer.key_id if reviewer else None
        return await record_and_count(self._store, approval, just_checked=just_checked)

    async def _publish_decision(
        self, event: DecisionSubmitted, headers: dict[str, str] | None = None
    ) -> None:
        """Publish ``event`` signed: the signature covers the exact bytes the bus carries."""
        signed = {**(headers or {}), **self._signer.headers(encode_event(event))}
        await self._publisher.publish(
            event, self._topics.decisions, key=event.execution_id, headers=signed
        )

    async def _claim(self, event: DecisionSubmitted, suspension_id: int) -> None:
        """Take the suspension's one decision claim for ``event``, or raise DecisionConflict."""
        holder = await self._store.decisions.claim(
            event.execution_id, suspension_id, Claim(event.decision_id, event.model_dump_json())
        )
        if holder.decision_id != event.decision_id:
            taken = DecisionSubmitted.model_validate_json(holder.payload)
            if taken.claimed:
                # A gateway's decision, whose event may have been lost if its gateway died
                # before publishing: publishing it again is harmless (the orchestrator applies a
                # decision once). A claim without ``claimed`` is one the orchestrator took for an
                # outside producer's decision, which it holds already: never signed here.
                await self._publish_decision(taken)
            raise conflict_with(taken, suspension_id)

    async def cancel(
        self,
        *,
        project_id: str,
        workspace_id: str,
        execution_id: str,
        reason: str | None,
        requested_by: str | None,
    ) -> Execution:
        """Ask the orchestrator to cancel. Raises ExecutionNotFound or AlreadyFinished."""
        execution = await self.get(project_id, workspace_id, execution_id)
        check_cancellable(execution)
        event = CancelRequested(
            execution_id=execution_id,
            correlation_id=execution_id,
            project_id=project_id,
            workspace_id=workspace_id,
            reason=reason,
            requested_by=requested_by,
        )
        signed = self._signer.headers(encode_event(event))  # as decisions: shared/senders.py
        await self._publisher.publish(
            event, self._topics.cancellations, key=execution_id, headers=signed
        )
        log.info("cancel.accepted", execution_id=execution_id)
        return execution

    async def erase_thread(
        self,
        *,
        project_id: str,
        workspace_id: str,
        thread_id: str,
        execution_ids: list[str],
        requested_by: str | None,
    ) -> None:
        """Ask the orchestrator to erase a deleted thread's turns, signed as cancellations are:
        it erases only on a gateway's signature (services/orchestrator/thread_erasure.py)."""
        first = turn_execution_id(project_id, workspace_id, thread_id, 1)
        event = ThreadDeleteRequested(
            execution_id=first,
            correlation_id=first,
            project_id=project_id,
            workspace_id=workspace_id,
            thread_id=thread_id,
            execution_ids=execution_ids,
            requested_by=requested_by,
        )
        signed = self._signer.headers(encode_event(event))
        await self._publisher.publish(
            event, self._topics.thread_deletions, key=first, headers=signed
        )

    async def approvals_of(self, execution: Execution) -> list[Approval]:
        """Approvals given so far toward the current suspension's decision."""
        if execution.suspension is None:
            return []
        return await self._store.approvals.list(
            execution.execution_id, execution.suspension.suspension_id
        )


def carrying(event: ExecutionRequested, execution: Execution) -> ExecutionRequested:
    """``event`` with the execution as stored, when it is small enough to carry: the
    orchestrator then starts it without reading it back."""
    stored = execution.model_dump_json()
    if len(stored) > MAX_STORED_AS_CHARS:
        return event
    return event.model_copy(update={"stored_as": stored})
