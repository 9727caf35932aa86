"""Decisions (and cancellations) the gateway did not sign: judged here, under the sender's own
identity, by the same rules an API key's answer meets at the gateway
(``shared/domain/judging.py``).

- A decision nobody signed (or signed with a key nobody registered) is refused: its
  ``reviewer`` and ``approvers`` are what the message claims, not who sent it. Anything that can
  write to the topic could otherwise approve any tenant's request.
- A registered outside producer (``shared/senders.py``) decides as an API key of its role
  would: only in its projects and workspaces, only with a role that may decide (the resume
  route's), never its own request where the agent forbids self-approval, and as one approver of
  a quorum. What it writes in ``reviewer``, ``approvers`` or ``claimed`` is replaced: the audit
  names the producer, the quorum is counted from the approvals store.
- A cancellation is held to the cancel route's rule the same way: nobody's is applied unsigned,
  a producer's only in its scope and with a cancelling role, recorded under its own name.
- The gateway's signed decisions passed these checks before they were published and are applied
  as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.orchestrator.state_machine import (
    CANCEL_REFUSED,
    CANCEL_UNAUTHENTICATED,
    DECISION_REFUSED,
    DECISION_UNAUTHENTICATED,
)
from shared.agents import AgentRegistry, ReviewRules
from shared.domain.decisions import resolve_decision
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.judging import (
    ReviewAnswer,
    approval_of,
    approvals_required,
    approving,
    check_may_decide,
)
from shared.domain.principals import Reviewer, SeparationOfDuties
from shared.events import CancelRequested, DecisionSubmitted
from shared.quorum import record_and_count
from shared.senders import GatewaySender, ProducerSender, Sender, Unverified
from shared.store.api_keys import CANCELLING_ROLES, DECIDING_ROLES, Role
from shared.store.ports import Store

UNVERIFIED_ACTOR = "unverified sender"


@dataclass(frozen=True)
class Apply:
    """Apply this decision (the producer's, with its identity and quorum filled in)."""

    event: DecisionSubmitted


@dataclass(frozen=True)
class Wait:
    """An approval recorded toward a quorum that is not complete yet: nothing to apply."""

    approvals: int
    needed: int


@dataclass(frozen=True)
class Refuse:
    """Not applied: audited under ``action`` with ``actor`` and dead-lettered with ``reason``."""

    action: str
    actor: str
    reason: str


Admission = Apply | Wait | Refuse


def answer_of(event: DecisionSubmitted) -> ReviewAnswer:
    return ReviewAnswer(
        decision=event.decision,
        decisions=event.decisions,
        resume=event.resume,
        interrupt_id=event.interrupt_id,
        generation=event.suspension_id,
        reviewer_notes=event.reviewer_notes,
        command=event.command,
    )


def _out_of_bounds(
    execution: Execution,
    producer: ProducerSender,
    roles: tuple[Role, ...],
    *,
    doing: str,
    refused: str,
) -> Refuse | None:
    """Why ``producer`` may not act on ``execution`` at all (its scope, its role), or None."""
    if not producer.may_act_in(execution.project_id, execution.workspace_id):
        return Refuse(
            refused,
            producer.label,
            f"{producer.label} is not registered for project {execution.project_id},"
            f" workspace {execution.workspace_id}",
        )
    if producer.role not in roles:
        return Refuse(
            refused,
            producer.label,
            f"{producer.label} has role {producer.role}; {doing} takes {', '.join(roles)}",
        )
    return None


def judge_cancel(
    execution: Execution, event: CancelRequested, sender: Sender
) -> CancelRequested | Refuse:
    """The cancellation to apply for ``sender`` (under its own name), or why not. Pure."""
    if isinstance(sender, GatewaySender):
        return event
    if isinstance(sender, Unverified):
        claimed = f" (it names {event.requested_by!r})" if event.requested_by else ""
        return Refuse(
            CANCEL_UNAUTHENTICATED,
            UNVERIFIED_ACTOR,
            f"not applied, {sender.reason}{claimed}; cancellations on the bus are applied only"
            " when the gateway or a registered producer signed them",
        )
    refusal = _out_of_bounds(
        execution, sender, CANCELLING_ROLES, doing="cancelling", refused=CANCEL_REFUSED
    )
    if refusal is not None:
        return refusal
    return event.model_copy(update={"requested_by": sender.label})


def judge_producer(
    execution: Execution, event: DecisionSubmitted, producer: ProducerSender, rules: ReviewRules
) -> Refuse | None:
    """Why ``producer`` may not give ``event`` at all, or None. Pure."""
    refused = DECISION_REFUSED
    out = _out_of_bounds(execution, producer, DECIDING_ROLES, doing="deciding", refused=refused)
    if out is not None:
        return out
    reviewer = Reviewer(label=producer.label, identity=producer.identity)
    try:
        check_may_decide(reviewer, execution, rules, answer_of(event))
    except SeparationOfDuties as exc:
        return Refuse(refused, producer.label, f"{exc.slug}: {exc}")
    return None


class OutsideDecisions:
    def __init__(self, *, store: Store, registry: AgentRegistry) -> None:
        self._store = store
        self._registry = registry

    async def admit(
        self, execution: Execution, event: DecisionSubmitted, sender: Sender
    ) -> Admission:
        """What to do with ``event`` from ``sender``, judged against ``execution`` (a fresh
        read). Raises DecisionError where the answer itself cannot apply, as for any sender."""
        if isinstance(sender, GatewaySender):
            return Apply(event)
        if isinstance(sender, Unverified):
            claimed = f" (it names reviewer {event.reviewer!r})" if event.reviewer else ""
            return Refuse(
                DECISION_UNAUTHENTICATED,
                UNVERIFIED_ACTOR,
                f"not applied, {sender.reason}{claimed}; decisions on the bus are applied only"
                " when the gateway or a registered producer signed them",
            )
        spec = self._registry.get(execution.agent)
        rules = spec.review if spec is not None else ReviewRules()
        refusal = judge_producer(execution, event, sender, rules)
        if refusal is not None:
            return refusal
        as_producer = event.model_copy(
            update={
                "reviewer": sender.label,
                "approvers": None,
                "discounted_approvers": None,
                "claimed": False,  # the orchestrator takes the claim for it
            }
        )
        answer = answer_of(event)
        if not approving(answer):
            return Apply(as_producer)  # a rejection acts at once, as at the gateway
        if execution.status is not ExecutionStatus.SUSPENDED:
            if rules.approvals_required > 1 or rules.approvals_required_for:
                return Refuse(
                    DECISION_REFUSED,
                    sender.label,
                    "this agent may need several approvals, which are counted against a"
                    " recorded suspension: send the decision after its execution.suspended",
                )
            return Apply(as_producer)  # parked or rejected by the state machine, as any
        needed = approvals_required(execution, rules)
        if needed <= 1:
            return Apply(as_producer)
        return await self._count(execution, answer, sender, as_producer, needed)

    async def _count(
        self,
        execution: Execution,
        answer: ReviewAnswer,
        producer: ProducerSender,
        as_producer: DecisionSubmitted,
        needed: int,
    ) -> Apply | Wait:
        resolution = resolve_decision(
            execution,
            decision=answer.decision,
            decisions=answer.decisions,
            reviewer_notes=answer.reviewer_notes,
            interrupt_id=answer.interrupt_id,
            suspension_id=answer.generation,
            resume=answer.resume,
            command=answer.command,
        )
        assert execution.suspension is not None  # resolve_decision checked it
        reviewer = Reviewer(label=producer.label, identity=producer.identity)
        approval = approval_of(
            execution, execution.suspension.suspension_id, answer, resolution, reviewer
        )
        counted, discounted = await record_and_count(self._store, approval, just_checked=None)
        people = len({a.counted_as for a in counted})
        if people < needed:
            return Wait(people, needed)
        return Apply(
            as_producer.model_copy(
                update={
                    "approvers": [a.reviewer for a in counted],
                    "discounted_approvers": discounted or None,
                }
            )
        )
