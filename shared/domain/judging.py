"""A reviewer's answer judged against the rules, whichever channel brought it: may this reviewer
give it, does it approve, which approvals count together. Pure, no I/O. The gateway judges an
answer before it stores or publishes anything (``services/gateway/intake.py``); the orchestrator
judges a decision an outside producer published on the bus under the producer's own identity
(``services/orchestrator/outside_decisions.py``): one rule for every channel."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from shared.agents import ReviewRules
from shared.domain.decisions import reviews_of
from shared.domain.execution import Execution
from shared.domain.human_interrupt import HUMAN_RESPONSE_TYPES as HUMAN_TYPES
from shared.domain.principals import Reviewer, check_link_approval, check_reviewer
from shared.domain.review import Resolution, is_resume_map
from shared.events import ActionDecision, ResumeCommand
from shared.store.approvals import Approval


class ReviewAnswer(BaseModel):
    """A reviewer's answer as the API takes it (see services/gateway/schemas.ResumeRequest)."""

    decision: str | None = None
    decisions: list[ActionDecision] | None = None
    resume: Any = None
    """LangGraph's form: what ``interrupt()`` returns (or a map of interrupt id to it)."""
    interrupt_id: str | None = None
    generation: int | None = None
    reviewer_notes: str | None = None
    command: ResumeCommand | None = None
    """What the answer asks of the graph besides (LangGraph's ``Command.goto`` / ``update``,
    or ``end``)."""


def approving(answer: ReviewAnswer) -> bool:
    """Does the answer let something run? A rejection (of everything) acts at once, and so does
    ``end`` (the run ends where it stands). A free value (``resume``) lets the agent go on, so it
    counts as approving: the requester may not give it where self-approval is off, and a quorum
    applies to it; so does a ``goto`` or an ``update``, which change what runs."""
    if answer.command is not None:
        return not answer.command.end
    if answer.decisions is not None:
        return any(d.type != "reject" for d in answer.decisions)
    if answer.resume is not None:
        return _resume_approves(answer.resume)
    return (answer.decision or "").strip().casefold() != "reject"


def _resume_approves(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().casefold() != "reject"
    if isinstance(value, dict) and isinstance(value.get("decision"), str):
        return _resume_approves(value["decision"])
    if isinstance(value, dict) and isinstance(value.get("decisions"), list):
        return any(
            not (isinstance(d, dict) and d.get("type") == "reject") for d in value["decisions"]
        )
    if is_resume_map(value):
        return any(_resume_approves(v) for v in value.values())
    if _human_responses(value):
        # Agent Inbox's answer: "ignore" skips the action, as a rejection does.
        return any(r["type"] != "ignore" for r in value)
    return True


def _human_responses(value: Any) -> bool:
    """Is ``value`` a list of LangGraph's ``HumanResponse`` (shared/domain/human_interrupt.py)?"""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(r, dict) and set(r) <= {"type", "args"} and r.get("type") in HUMAN_TYPES
            for r in value
        )
    )


def answer_key(answer: ReviewAnswer, resolution: Resolution) -> str:
    """Approvals count together when they say the same thing; notes may differ."""
    said: dict[str, Any] = {
        "interrupts": sorted(resolution.values),
        "decision": resolution.summary if answer.decisions is None else None,
        "decisions": [d.model_dump() for d in answer.decisions or []],
    }
    if answer.resume is not None:
        # Only when given: an approval stored before this form existed keeps its key.
        said["resume"] = answer.resume
    if answer.command is not None:
        said["command"] = answer.command.model_dump(mode="json")
    return hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()


def check_may_decide(
    reviewer: Reviewer, execution: Execution, rules: ReviewRules, answer: ReviewAnswer
) -> None:
    """Separation of duties: raise SeparationOfDuties when ``reviewer`` may not give ``answer``."""
    check_reviewer(
        reviewer,
        agent=execution.agent,
        self_approval=rules.self_approval,
        requester_identity=execution.requester_identity,
        requester_label=execution.requested_by,
    )
    if approving(answer):
        check_link_approval(reviewer, agent=execution.agent, link_approvals=rules.link_approvals)


def approval_of(
    execution: Execution,
    suspension_id: int,
    answer: ReviewAnswer,
    resolution: Resolution,
    reviewer: Reviewer | None,
) -> Approval:
    """The approval ``answer`` gives toward a decision that needs several."""
    return Approval(
        execution_id=execution.execution_id,
        generation=suspension_id,
        reviewer=reviewer.label if reviewer else "anonymous",
        identity=reviewer.identity if reviewer else None,
        key_id=reviewer.key_id if reviewer else None,
        via_link=reviewer.via_link if reviewer else False,
        answer_key=answer_key(answer, resolution),
        summary=resolution.summary,
        reviewer_notes=answer.reviewer_notes,
    )


def approvals_required(execution: Execution, rules: ReviewRules) -> int:
    """How many distinct people must give the same approving answer to the current suspension."""
    return rules.approvals_for([a.name for r in reviews_of(execution) for a in r.actions])
