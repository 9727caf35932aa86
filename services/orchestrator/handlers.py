"""The orchestrator's handlers: take the execution, apply the state machine with a
compare-and-set, then publish what the stored state calls for.

The execution an event applies to is this replica's copy of the version it last stored or read
(services/orchestrator/known.py), read from the store only when it has none. A copy may be out
of date; the compare-and-set tells: its insert loses, and the handler reads the newest version
and applies the event again. An outcome that writes nothing (an ignored event, a refused
decision) is never concluded from a copy: it is decided again on a fresh read.

Idempotency: each handler recomputes from the stored execution. A redelivered event changes
nothing (the state machine ignores it) and the follow-ups are published again, so work lost to a
crash between the write and the publish is re-driven. Nothing records what was sent: a repeated
command is recognised downstream by its deterministic event id and epoch (the sandbox skips a
dispatch of an epoch that is not the execution's, and a repeated one of the current epoch finds
its run's checkpoint and reports its outcome again; its attempt ledger fences an older run).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from datetime import datetime

import structlog

from services.orchestrator import state_machine as sm
from services.orchestrator.known import KnownExecutions
from services.orchestrator.outside_decisions import OutsideDecisions, Refuse, Wait, judge_cancel
from services.orchestrator.transitions import with_audit
from shared import metrics, tracing
from shared.activity import CHANGED_IN_HEADER, ExecutionActivity
from shared.agents import AgentRegistry
from shared.bus import EventPublisher, Outgoing, carried_headers, publish_in_order
from shared.domain.deadlines import DeadlineKind
from shared.domain.decisions import DecisionError
from shared.domain.execution import (
    AuditEntry,
    Execution,
    ExecutionStatus,
    new_pending_execution,
    request_of,
)
from shared.domain.runs import webhook_payload, webhooks_due
from shared.domain.threads import MAX_TURN_PROBES, has_run, left_state, turn_execution_id
from shared.errors import ConcurrencyConflict, RejectedMessage
from shared.events import (
    AgentInput,
    CancelRequested,
    DecisionSubmitted,
    EventModel,
    ExecutionReported,
    ExecutionRequested,
    ExecutionStatusChanged,
    ExecutionSuspended,
    ReportOutcome,
    RunWebhookDue,
    utc_now,
)
from shared.faults import fault_point
from shared.senders import GatewaySender, ProducerSender, Sender
from shared.store.ports import Claim, Store, nothing_to_settle
from shared.topics import Topics

log = structlog.get_logger(__name__)

MAX_CAS_ATTEMPTS = 8


class DeadlineFired(EventModel):
    """The cause recorded for what a deadline or a sweep does (never published)."""

    execution_id: str
    project_id: str
    workspace_id: str


def requested_as(event: ExecutionRequested, sender: Sender) -> ExecutionRequested:
    """``event`` with the requester its sender proves: a registered producer's identity, or none
    (the label it gives is kept, as a label) for a request nobody signed."""
    if isinstance(sender, GatewaySender):
        return event
    # What the request says was stored is a gateway's word only.
    if isinstance(sender, ProducerSender):
        return event.model_copy(
            update={
                "requested_by": sender.label,
                "requester_identity": sender.identity,
                "stored_as": None,
            }
        )
    return event.model_copy(update={"requester_identity": None, "stored_as": None})


def stored_by_gateway(event: ExecutionRequested) -> Execution | None:
    """The execution a (gateway's) request carries as the gateway stored it, if it carries this
    one (``requested_as`` has dropped what any other sender said was stored)."""
    if event.stored_as is None:
        return None
    carried = Execution.model_validate_json(event.stored_as)
    scope = (carried.execution_id, carried.project_id, carried.workspace_id)
    if scope != (event.execution_id, event.project_id, event.workspace_id):
        return None
    return carried


def with_input(outcome: sm.Outcome, given: AgentInput) -> sm.Outcome:
    """A dispatching outcome with the input as resolved for its thread (the base it starts
    from); any other outcome as it is."""
    if not outcome.changed or outcome.execution.input == given:
        return outcome
    return dataclasses.replace(
        outcome, execution=outcome.execution.model_copy(update={"input": given})
    )


def starter(request: ExecutionRequested, given: AgentInput) -> Callable[[Execution], sm.Outcome]:
    """The step that dispatches a turn woken by the end of the one before."""

    def start(execution: Execution) -> sm.Outcome:
        return with_input(sm.on_requested(execution, request), given)

    return start


Loaded = tuple[Execution, bool]
"""An execution and whether it was just read from the store (else it is this replica's copy)."""


@dataclasses.dataclass(frozen=True)
class Stored:
    """An outcome as stored, and the writes that follow its compare-and-set (none for an
    outcome that changed nothing)."""

    outcome: sm.Outcome
    settle: Callable[[], Awaitable[None]] = nothing_to_settle


class Orchestrator:
    def __init__(
        self,
        *,
        store: Store,
        publisher: EventPublisher,
        topics: Topics,
        registry: AgentRegistry,
        clock: Callable[[], datetime] = utc_now,
        known: KnownExecutions | None = None,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._topics = topics
        self._registry = registry
        self._clock = clock
        self._known = known if known is not None else KnownExecutions()
        self._outside = OutsideDecisions(store=store, registry=registry)

    # --- inputs ------------------------------------------------------------------------------

    async def on_requested(self, event: ExecutionRequested, sender: Sender) -> None:
        """Start the execution ``event`` requests. The gateway stored it before publishing, with
        the requester it authenticated; a request that only the topic carries is recorded with
        the identity its signature proves (a registered producer's), never the one it claims."""
        await self._start_requested(requested_as(event, sender))

    def knows_agent(self, agent: str) -> bool:
        return self._registry.get(agent) is not None

    async def on_scheduled(self, event: ExecutionRequested) -> None:
        """Start a cron's tick, whose execution the cron sweeper stored a moment ago with the
        cron's creator as its requester (services/orchestrator/crons.py): as any request, from
        the stored execution. Called again for a tick whose start was cut short, it starts the
        same execution, once."""
        await self._start_requested(event)

    async def _start_requested(self, event: ExecutionRequested) -> None:
        if self._registry.get(event.agent) is None:
            raise RejectedMessage(
                f"unknown agent {event.agent!r}; registered: {', '.join(self._registry.names())}"
            )
        execution, fresh = await self._requested(event)
        if (execution.project_id, execution.workspace_id, execution.agent) != (
            event.project_id,
            event.workspace_id,
            event.agent,
        ):
            raise RejectedMessage(
                f"execution id {event.execution_id} is already used by another request"
            )
        starting = await self._turn_start(execution)
        if starting is None:
            # The turn before it still runs or waits for a review: its end starts this one
            # (``_wake_next_turn``), so nothing is written or sent now.
            log.info("turn.queued", execution_id=execution.execution_id)
            return
        await self._apply(
            (execution, fresh), lambda e: with_input(sm.on_requested(e, event), starting), event
        )

    async def _turn_start(
        self, execution: Execution, known: Execution | None = None
    ) -> AgentInput | None:
        """The input to dispatch the execution with as far as its thread goes, or None while
        it must wait. A turn waits until every turn before it ended: the one before, and past it
        (when that one was cancelled while it waited, so never ran) the ones before that. It
        starts from its base's checkpoint, or, when the base left none, from that one's base.
        ``known``: a turn before, as just read."""
        turn = execution.input.turn
        if turn is None or execution.status is not ExecutionStatus.PENDING or execution.epoch:
            return execution.input
        read: dict[str, Execution | None] = {} if known is None else {known.execution_id: known}

        async def turn_of(execution_id: str) -> Execution | None:
            if execution_id not in read:
                # A turn this replica saw end stays ended: its copy answers (any other copy may
                # be behind, so the store does).
                known_copy = self._known.get(execution_id)
                if known_copy is not None and known_copy.status.is_terminal:
                    read[execution_id] = known_copy
                else:
                    read[execution_id] = await self._store.executions.get(
                        execution.project_id, execution_id
                    )
            return read[execution_id]

        after = turn.after
        for _ in range(MAX_TURN_PROBES):
            before = None if after is None else await turn_of(after)
            if before is None or (before.status.is_terminal and has_run(before)):
                break  # a turn ran only once every turn before it had ended
            if not before.status.is_terminal or before.input.turn is None:
                return None
            after = before.input.turn.after
        else:
            return None
        base = turn.base
        for _ in range(MAX_TURN_PROBES):
            source = None if base is None else await turn_of(base)
            if source is None or left_state(source) or source.input.turn is None:
                break
            base = source.input.turn.base
        if base == turn.base:
            return execution.input
        return execution.input.model_copy(update={"turn": turn.model_copy(update={"base": base})})

    async def _wake_next_turn(self, ended: Execution, cause: EventModel) -> None:
        """Start the turn that waits for ``ended`` (now over), if one does; past turns cancelled
        while they waited, the first that still waits. A redelivered event of an ended turn
        comes here again, so a crash between its end and this start loses nothing; of two
        replicas starting one turn, the compare-and-set lets one write it."""
        turn = ended.input.turn
        if turn is None:
            return
        previous = ended
        for number in range(turn.turn + 1, turn.turn + 1 + MAX_TURN_PROBES):
            following_id = turn_execution_id(
                ended.project_id, ended.workspace_id, turn.thread_id, number
            )
            following = await self._store.executions.get(ended.project_id, following_id)
            if following is None or following.input.turn is None:
                return
            if following.status is ExecutionStatus.PENDING and following.undelivered_since:
                # Its request never reached the bus and its client was told 503: a retry is a
                # turn of its own, so this one is left to the sweep that abandons it, and its
                # end wakes the turn after it.
                return
            if following.status is ExecutionStatus.PENDING:
                # At epoch 0 it waits to be started; past it, a crash came between storing its
                # start and sending its dispatch: applying the start again re-sends what its
                # stored state calls for (the sandbox recognises a repeated dispatch).
                starting = await self._turn_start(following, previous)
                if starting is not None:
                    request = request_of(following)
                    log.info("turn.woken", execution_id=following_id, after=previous.execution_id)
                    await self._apply((following, True), starter(request, starting), cause)
                return
            if not (following.status.is_terminal and not has_run(following)):
                return
            previous = following

    async def _requested(self, event: ExecutionRequested) -> Loaded:
        """The execution a request names: normally the gateway stored it a moment ago, and any
        version of it will do (one point read); a producer publishing to the topic directly
        has it created here."""
        known = self._known.get(event.execution_id)
        if known is not None:
            return known, False
        carried = stored_by_gateway(event)
        if carried is not None:
            return carried, False  # as a copy: the compare-and-set tells if it is the newest
        # Any version will do (min_epoch=0): the compare-and-set tells if it is not the newest.
        found = await self._store.executions.get(event.project_id, event.execution_id, min_epoch=0)
        if found is not None:
            return found, False
        first = new_pending_execution(event, None, tracing.current_carrier())
        execution, _ = await self._store.executions.create(first)
        # Created now, or (a race, another project's id) the newest stored version: fresh.
        if execution.project_id == event.project_id:
            self._known.put(execution)
        return execution, True

    async def on_decision(self, event: DecisionSubmitted, sender: Sender) -> None:
        """Apply ``event`` if ``sender`` may give it (services/orchestrator/outside_decisions.py:
        the gateway's signed decisions as they are, a registered producer's under its own
        identity, nobody else's)."""
        execution, fresh = await self._load(event)
        if not isinstance(sender, GatewaySender):
            if not fresh:  # judged on the newest version, never on a copy
                execution, fresh = await self._reload(execution)
            admitted = await self._admit(execution, event, sender)
            if admitted is None:
                return
            event = admitted
        holders: dict[int, Claim] = {}
        for _ in range(MAX_CAS_ATTEMPTS):
            # No agent-version check here (the gateway's is the early 409): the sandbox refuses
            # a resume under code it no longer runs, and the execution is suspended again under
            # a new suspension, with a claim of its own. A refusal here would leave the claim
            # the gateway took on this suspension held by a decision that never applies.
            try:
                outcome = sm.on_decision(execution, event)
            except DecisionError as exc:
                if not fresh:
                    execution, fresh = await self._reload(execution)
                    continue
                await self._reject_decision(execution, event, str(exc))
                raise RejectedMessage(str(exc)) from exc
            if not outcome.changed and not fresh:
                execution, fresh = await self._reload(execution)
                continue
            if outcome.claim is not None:
                if outcome.claim not in holders:
                    holders[outcome.claim] = await self._claim(event, outcome.claim)
                if holders[outcome.claim].decision_id != event.decision_id:
                    if not fresh:  # the suspension it names may be an old one
                        execution, fresh = await self._reload(execution)
                        continue
                    reason = f"suspension {outcome.claim} already has a decision"
                    await self._reject_decision(execution, event, reason)
                    raise RejectedMessage(reason)
            stored = await self._store_outcome(execution, outcome)
            if stored is None:
                execution, fresh = await self._reload(execution)
                continue
            if stored.outcome.transitions and execution.suspension is not None:
                # The decision resumed the suspension it answered (a parked one is applied in
                # on_suspended, moments after its suspension, and is not a reviewer's wait).
                waited = self._clock() - execution.suspension.suspended_at
                metrics.REVIEW_WAIT_SECONDS.observe(max(0.0, waited.total_seconds()))
            await self._conclude(stored, event)
            return
        raise ConcurrencyConflict(f"execution {event.execution_id} kept changing")

    async def _admit(
        self, execution: Execution, event: DecisionSubmitted, sender: Sender
    ) -> DecisionSubmitted | None:
        """The decision to apply for an outside sender, or None when there is nothing to apply
        yet (an approval toward a quorum). Raises RejectedMessage, audited, when refused."""
        try:
            admission = await self._outside.admit(execution, event, sender)
        except DecisionError as exc:
            await self._reject_decision(execution, event, str(exc))
            raise RejectedMessage(str(exc)) from exc
        if isinstance(admission, Refuse):
            log.warning(
                "decision.refused",
                action=admission.action,
                actor=admission.actor,
                reason=admission.reason,
            )
            await self._reject_decision(
                execution, event, admission.reason, action=admission.action, actor=admission.actor
            )
            raise RejectedMessage(admission.reason)
        if isinstance(admission, Wait):
            assert isinstance(sender, ProducerSender)  # only a producer's approval waits
            log.info(
                "approval.recorded",
                producer=sender.name,
                approvals=admission.approvals,
                needed=admission.needed,
            )
            return None
        return admission.event

    async def _claim(self, event: DecisionSubmitted, suspension_id: int) -> Claim:
        """The claim holding the suspension's one decision: the gateway took it before
        publishing the event and says so (``claimed``: nothing read); a producer publishing to
        the topic directly has it read, or taken here."""
        if event.claimed:
            return Claim(event.decision_id, "")
        held = await self._store.decisions.holder(event.execution_id, suspension_id)
        if held is not None:
            return held
        claim = Claim(event.decision_id, event.model_dump_json())
        return await self._store.decisions.claim(event.execution_id, suspension_id, claim)

    async def on_cancel(self, event: CancelRequested, sender: Sender) -> None:
        """Cancel if ``sender`` may: the gateway's signed cancellation, a registered producer's
        in its scope and role (recorded under its name), nobody else's."""
        loaded = await self._load(event)
        judged = judge_cancel(loaded[0], event, sender)  # scope only: safe on a copy
        if isinstance(judged, Refuse):
            entry = AuditEntry(
                actor=judged.actor,
                action=judged.action,
                reason=judged.reason,
                event_id=event.event_id,
            )
            log.warning("cancel.refused", action=judged.action, reason=judged.reason)
            await self._audit_once(loaded[0], event, entry)
            raise RejectedMessage(judged.reason)
        await self._cancel(loaded, judged)

    async def cancel_replaced(self, event: CancelRequested) -> None:
        """Cancel a thread's turn that a cron's tick replaces (``multitask_strategy``
        ``interrupt`` / ``rollback``, which only an owner may give a cron): on the orchestrator's
        own authority, called by its cron sweeper, never from the bus. Raises
        ``RejectedMessage`` when the turn ended meanwhile."""
        await self._cancel(await self._load(event), event)

    async def _cancel(self, loaded: tuple[Execution, bool], event: CancelRequested) -> None:
        def cancel(current: Execution) -> sm.Outcome:
            try:
                return sm.on_cancel(current, event)
            except sm.AlreadyFinished as exc:
                # Safe on a copy: an execution that ended never runs again.
                raise RejectedMessage(str(exc)) from exc

        await self._apply(loaded, cancel, event)

    # --- sandbox reports ---------------------------------------------------------------------

    async def on_suspended(self, event: ExecutionSuspended) -> None:
        loaded = await self._load(event)
        spec = self._registry.get(loaded[0].agent)
        # Absolute times from now, so a restart or a changed agents file never moves them.
        deadlines = spec.deadlines.deadlines_from(self._clock()) if spec else None

        async def remark(execution: Execution) -> None:
            # Recorded already: by a delivery that may have died before the suspension's marker
            # was written (it is written while the version is, shared/store/mongo/markers.py),
            # so the marker is made again.
            if execution.status is ExecutionStatus.SUSPENDED and execution.epoch == event.epoch:
                await self._store.executions.mark_waiting(execution)

        await self._apply(
            loaded, lambda e: sm.on_suspended(e, event, deadlines), event, unchanged=remark
        )

    async def on_deadline(self, execution: Execution, kind: DeadlineKind) -> int:
        """Fire one deadline of the current suspension (the sweeper calls this); 1 if this
        call fired it, 0 if it had fired already or the suspension moved on."""
        assert execution.suspension is not None
        suspension_id = execution.suspension.suspension_id
        cause = DeadlineFired(
            event_id=f"{execution.execution_id}:{suspension_id}:{kind.value}",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
        )
        fired = False

        def fire(current: Execution) -> sm.Outcome:
            nonlocal fired
            outcome = sm.on_deadline(current, kind, suspension_id)
            fired = outcome.changed
            return outcome

        await self._apply((execution, False), fire, cause)
        if fired:
            metrics.DEADLINES_FIRED.labels(kind.value).inc()
            log.info("deadline.fired", kind=kind.value, execution_id=execution.execution_id)
        return int(fired)

    async def abandon(self, execution: Execution, cutoff: datetime) -> int:
        """End a request left undelivered since before ``cutoff`` (the sweeper calls this); 1
        if this call ended it, 0 if a retry delivered it or another replica ended it first."""
        cause = DeadlineFired(
            event_id=f"{execution.execution_id}:abandoned",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            workspace_id=execution.workspace_id,
        )
        ended = False

        def end(current: Execution) -> sm.Outcome:
            nonlocal ended
            outcome = sm.on_abandoned(current, cutoff=cutoff)
            ended = bool(outcome.transitions)
            return outcome

        await self._apply((execution, False), end, cause)
        if ended:
            log.warning("request.abandoned", execution_id=execution.execution_id)
        return int(ended)

    async def on_reported(self, event: ExecutionReported) -> None:
        loaded = await self._load(event)
        if event.outcome is ReportOutcome.STARTED:
            await self._apply(loaded, lambda e: sm.on_started(e, event), event)
        elif event.outcome is ReportOutcome.REFUSED:
            await self._apply(loaded, lambda e: sm.on_refused(e, event), event)
        else:
            await self._apply(loaded, lambda e: sm.on_finished(e, event), event)

    # --- plumbing ----------------------------------------------------------------------------

    async def _load(
        self, event: DecisionSubmitted | CancelRequested | ExecutionSuspended | ExecutionReported
    ) -> Loaded:
        """This replica's copy of the execution, else the newest stored version. (Project and
        workspace never change, so a copy answers for them as well as the store.)"""
        known = self._known.get(event.execution_id)
        if known is not None:
            loaded: Loaded = (known, False)
        else:
            found = await self._store.executions.get(event.project_id, event.execution_id)
            if found is None:
                raise RejectedMessage(f"unknown execution {event.execution_id}")
            self._known.put(found)
            loaded = (found, True)
        execution = loaded[0]
        if (execution.project_id, execution.workspace_id) != (
            event.project_id,
            event.workspace_id,
        ):
            raise RejectedMessage(f"unknown execution {event.execution_id}")
        return loaded

    async def _reload(self, execution: Execution) -> Loaded:
        """The newest stored version, after a lost compare-and-set or to confirm a copy."""
        reloaded = await self._store.executions.get(execution.project_id, execution.execution_id)
        if reloaded is None:
            raise RejectedMessage(f"execution {execution.execution_id} disappeared")
        self._known.put(reloaded)
        return reloaded, True

    async def _store_outcome(self, execution: Execution, outcome: sm.Outcome) -> Stored | None:
        """Compare-and-set a changed outcome's execution after ``execution``: the outcome as
        stored (with its version) and the writes that follow the compare-and-set, or None when
        another writer got there first. An unchanged outcome is returned as it is."""
        if not outcome.changed:
            return Stored(outcome)
        written = await self._store.executions.compare_and_set(execution, outcome.execution)
        if written is None:
            return None
        self._known.put(written.execution)
        return Stored(dataclasses.replace(outcome, execution=written.execution), written.settle)

    async def _apply(
        self,
        loaded: Loaded,
        step: Callable[[Execution], sm.Outcome],
        event: EventModel,
        *,
        unchanged: Callable[[Execution], Awaitable[None]] | None = None,
    ) -> None:
        """Apply ``step`` by compare-and-set and publish what follows; ``unchanged`` is given
        the newest version when the step changes nothing in it (a redelivery, mostly)."""
        execution, fresh = loaded
        for _ in range(MAX_CAS_ATTEMPTS):
            outcome = step(execution)
            if not outcome.changed and not fresh:
                # Nothing to do, says a copy that may be out of date: ask the newest version.
                execution, fresh = await self._reload(execution)
                continue
            if not outcome.changed and unchanged is not None:
                await unchanged(execution)
            stored = await self._store_outcome(execution, outcome)
            if stored is None:
                execution, fresh = await self._reload(execution)
                continue
            await self._conclude(stored, event)
            return
        raise ConcurrencyConflict(f"execution {execution.execution_id} kept changing")

    async def _reject_decision(
        self,
        execution: Execution,
        event: DecisionSubmitted,
        reason: str,
        *,
        action: str = sm.DECISION_REJECTED,
        actor: str | None = None,
    ) -> None:
        """Record a rejected (or refused) decision in the audit trail, once per event."""
        entry = sm.decision_refusal(event, reason, action=action, actor=actor)
        await self._audit_once(execution, event, entry)

    async def _audit_once(self, execution: Execution, cause: EventModel, entry: AuditEntry) -> None:
        """Append ``entry`` (what ``cause`` did not do, and why) to the audit trail, once per
        event and action."""
        for _ in range(MAX_CAS_ATTEMPTS):
            if any(
                a.event_id == entry.event_id and a.action == entry.action for a in execution.audit
            ):
                # Recorded by an earlier delivery, which may have died before announcing it.
                await self._announce(execution, cause)
                return
            updated = with_audit(execution, entry)
            stored = await self._store.executions.replace(execution, updated)
            if stored is not None:
                self._known.put(stored)
                await self._announce(stored, cause)
                return
            execution, _ = await self._reload(execution)

    async def _conclude(self, stored: Stored, cause: EventModel) -> None:
        """Publish what the stored outcome calls for while the writes that follow its
        compare-and-set are made: the next service starts on it one store round trip sooner
        (what it reads of the execution does not need them: ``Written.settle``). Both are done
        before the handler returns, so the message is acknowledged after them."""
        settled, published = await asyncio.gather(
            stored.settle(), self._publish_after(stored.outcome, cause), return_exceptions=True
        )
        for failure in (settled, published):
            if isinstance(failure, BaseException):
                raise failure

    async def _publish_after(self, outcome: sm.Outcome, cause: EventModel) -> None:
        execution = outcome.execution
        if outcome.changed:
            fault_point("orchestrator.after_write")
        # Only a stored outcome gets here with transitions (a redelivery has none), so each
        # transition is counted once per compare-and-set that made it.
        for change in outcome.transitions:
            metrics.TRANSITIONS.labels(change.from_status.value, change.to_status.value).inc()
        if outcome.ignored:
            log.info("event.ignored", why=outcome.ignored, status=execution.status.value)
        outgoing = [
            # Sent after every outcome, a redelivery's too: see the module's docstring. The
            # caller's custom headers go to the sandbox for this run segment only, as they came:
            # sealed for the sandbox (the orchestrator holds no key to open them).
            Outgoing(command, self._topics.dispatched, execution.execution_id, carried_headers())
            for command in sm.follow_ups(execution, causation_id=cause.event_id)
        ]
        changes = outcome.transitions or [
            # Nothing changed now; re-announce the current state in case the earlier announcement
            # was lost in a crash. Consumers drop versions they have seen.
            sm.Transition(execution.status, execution.status, sm.status_sequence(execution), None)
        ]
        for change in changes:
            status = ExecutionStatusChanged(
                event_id=f"{execution.execution_id}:status:{change.sequence}",
                execution_id=execution.execution_id,
                project_id=execution.project_id,
                workspace_id=execution.workspace_id,
                agent=execution.agent,
                status=change.to_status,
                previous_status=change.from_status if outcome.transitions else None,
                sequence=change.sequence,
                reason=change.reason,
                causation_id=cause.event_id,
                correlation_id=execution.execution_id,
            )
            outgoing.append(Outgoing(status, self._topics.status, execution.execution_id))
        outgoing.append(self._announcement(execution, cause))
        outgoing.extend(self._webhooks_due(execution, cause))
        # One produce request and one wait for all of them, in this order.
        await publish_in_order(self._publisher, outgoing)
        if execution.status.is_terminal and execution.input.turn is not None:
            await self._wake_next_turn(execution, cause)

    def _webhooks_due(self, execution: Execution, cause: EventModel) -> list[Outgoing]:
        """The runs that ended and asked to be told (nearly every execution asks nothing: no
        message, and nothing computed)."""
        return [
            Outgoing(
                RunWebhookDue(
                    event_id=f"{execution.execution_id}:webhook:{hook.epoch}",
                    execution_id=execution.execution_id,
                    project_id=execution.project_id,
                    workspace_id=execution.workspace_id,
                    epoch=hook.epoch,
                    url=hook.url,
                    payload=webhook_payload(execution, hook),
                    causation_id=cause.event_id,
                    correlation_id=execution.execution_id,
                ),
                self._topics.run_webhooks,
                execution.execution_id,
            )
            for hook in webhooks_due(execution)
        ]

    async def _announce(self, execution: Execution, cause: EventModel) -> None:
        await publish_in_order(self._publisher, [self._announcement(execution, cause)])

    def _announcement(self, execution: Execution, cause: EventModel) -> Outgoing:
        """For the gateways' live streams (shared/activity.py): once per handled event, the
        whole trail, so a lost announcement is made good by the next or by a redelivery."""
        return Outgoing(
            ExecutionActivity.changed(execution, causation_id=cause.event_id),
            self._topics.activity,
            execution.execution_id,
            {CHANGED_IN_HEADER: execution.project_id},
        )
