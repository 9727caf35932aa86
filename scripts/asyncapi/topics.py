"""What each topic carries and who produces and consumes it: the tables the document is built from.

One function per topic, each returning its :class:`TopicDoc`; ``topic_docs`` lists them in
``Topics.all()`` order and fails if a topic has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from shared.activity import ExecutionActivity
from shared.events import (
    CancelRequested,
    DecisionSubmitted,
    ExecutionDispatched,
    ExecutionReported,
    ExecutionRequested,
    ExecutionStatusChanged,
    ExecutionSuspended,
    MessageDeadLettered,
    ReviewDeadlineReached,
    RunWebhookDue,
    ThreadDeleteRequested,
)
from shared.topics import Topics

__all__ = ["EXTERNAL", "Action", "Party", "TopicDoc", "operation_id", "topic_docs"]

Action = Literal["send", "receive"]

EXTERNAL = "external"
"""The party name of outside systems that publish to or subscribe to a topic directly."""


@dataclass(frozen=True)
class Party:
    """One producer or consumer of a topic: a service, or ``external`` for outside systems."""

    name: str
    description: str
    grouped: bool = True
    """Consumes in the service's consumer group (False: every process hears everything)."""


@dataclass(frozen=True)
class TopicDoc:
    topic: str
    model: type[BaseModel]
    summary: str
    description: str
    producers: tuple[Party, ...]
    consumers: tuple[Party, ...]
    key: str = "The `execution_id` of the execution the message is about."

    @property
    def message_name(self) -> str:
        return self.model.__name__

    def endpoints(self) -> list[tuple[Action, Party]]:
        sends: list[tuple[Action, Party]] = [("send", p) for p in self.producers]
        receives: list[tuple[Action, Party]] = [("receive", p) for p in self.consumers]
        return sends + receives


def operation_id(action: Action, party: Party, topic: str) -> str:
    """The id of one party's operation on a topic (also the title of its FastStream endpoint)."""
    return f"{party.name}:{action}:{topic}"


def _requested(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.requested,
        model=ExecutionRequested,
        summary="Start a new execution of a registered agent.",
        description=(
            "Requests to run an agent. The gateway publishes one per accepted invocation; any "
            "outside system may publish here directly, choosing the `execution_id` itself. "
            "The orchestrator consumes it."
        ),
        producers=(
            Party(
                "gateway",
                "`POST /api/v1/projects/{project_id}/workspaces/{workspace_id}/invoke` stores "
                "the pending execution, then publishes with `event_id` "
                "`<execution_id>:requested`.",
            ),
            Party(
                EXTERNAL,
                "Outside producers publish directly. A repeated `execution_id` for the same "
                "request is a harmless duplicate.",
            ),
        ),
        consumers=(
            Party(
                "orchestrator",
                "Creates the execution if it is new and dispatches its first attempt. An "
                "unregistered agent, or an `execution_id` already used by another request, "
                "is dead-lettered.",
            ),
        ),
    )


def _decisions(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.decisions,
        model=DecisionSubmitted,
        summary="A reviewer's decision on a suspended execution.",
        description=(
            "Answers the current (or the given `suspension_id`) suspension of an execution "
            "with one of its `allowed_decisions` and optional `reviewer_notes`. The gateway "
            "or any outside system publishes it; the orchestrator consumes it."
        ),
        producers=(
            Party(
                "gateway",
                "`POST /api/v1/projects/{project_id}/executions/{execution_id}/resume` "
                "validates the decision and claims the suspension's one decision before "
                "publishing, so of concurrent reviewers exactly one is accepted.",
            ),
            Party(
                EXTERNAL,
                "Outside producers publish directly; the orchestrator validates the decision "
                "again. Re-sending the same `decision_id` is a harmless retry.",
            ),
        ),
        consumers=(
            Party(
                "orchestrator",
                "Applies the decision once and dispatches the resume. A decision that cannot "
                "apply (not suspended, stale `suspension_id`, not allowed, or a suspension "
                "that already has another decision) is recorded in the execution's audit "
                "trail and dead-lettered.",
            ),
        ),
    )


def _cancellations(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.cancellations,
        model=CancelRequested,
        summary="Stop an execution.",
        description=(
            "Cancels a pending, running, suspended or resuming execution. A run still under "
            "way is not interrupted, but everything it reports afterwards is ignored."
        ),
        producers=(
            Party(
                "gateway",
                "`POST /api/v1/projects/{project_id}/executions/{execution_id}/cancel` "
                "(PROJECT_OWNER) publishes it.",
            ),
            Party(EXTERNAL, "Outside producers publish directly."),
        ),
        consumers=(
            Party(
                "orchestrator",
                "Moves the execution to `cancelled` once; a repeat is ignored; cancelling an "
                "execution that already ended is dead-lettered with the reason.",
            ),
        ),
    )


def _thread_deletions(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.thread_deletions,
        model=ThreadDeleteRequested,
        summary="Erase a deleted thread's turns.",
        description=(
            "Internal. The gateway made the thread a tombstone and checked that every turn it "
            "lists ended; its executions' checkpoints, durable steps, attempts and progress go, "
            "and their audit too unless the orchestrator keeps it "
            "(`INTERLOCK_THREAD_DELETE_KEEPS_AUDIT`, the default)."
        ),
        producers=(
            Party(
                "gateway",
                "`DELETE /langgraph/projects/{project_id}/workspaces/{workspace_id}/threads/"
                "{thread_id}` (`threads.delete`) publishes it, signed.",
            ),
        ),
        consumers=(
            Party(
                "orchestrator",
                "Erases the listed turns and any later turn that ended, once or again "
                "harmlessly; one not signed by a gateway is dead-lettered with the reason.",
            ),
        ),
        key="The `execution_id` of the thread's first turn.",
    )


def _dispatched(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.dispatched,
        model=ExecutionDispatched,
        summary="Command to the sandbox: start or resume one attempt of an execution.",
        description=(
            "Internal command from the orchestrator to the sandbox. `kind: start` carries the "
            "`input`; `kind: resume` carries the reviewer's decision in `resume`. `epoch` "
            "numbers the attempt."
        ),
        producers=(
            Party(
                "orchestrator",
                "Publishes the command the stored execution calls for, with the "
                "deterministic `event_id` `<execution_id>:dispatch:<epoch>`; it may send the "
                "same command again after a crash or a redelivery.",
            ),
        ),
        consumers=(
            Party(
                "sandbox",
                "Runs or resumes the agent from its checkpoint. A command whose `epoch` is "
                "not the execution's current one, or for a finished execution, is ignored.",
            ),
        ),
    )


def _suspended(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.suspended,
        model=ExecutionSuspended,
        summary="An agent paused for human review.",
        description=(
            "The agent called `interrupt(...)`: `suspend_context` is what the reviewer "
            "sees, `allowed_decisions` constrains the answer (empty: any non-empty decision), "
            "and `interrupts` lists the pending LangGraph interrupts. Published by the "
            "sandbox; consumed by the orchestrator, the notifier and outside subscribers."
        ),
        producers=(
            Party(
                "sandbox",
                "Publishes when an attempt stops on interrupts, with `suspension_id` equal to "
                "the attempt's `epoch` and `event_id` `<execution_id>:suspended:<epoch>`.",
            ),
        ),
        consumers=(
            Party("orchestrator", "Moves the execution to `suspended`."),
            Party(
                "notifier",
                "Announces the review request (one structured log line until notification "
                "channels exist).",
            ),
            Party(
                EXTERNAL,
                "Outside systems (review inboxes, chat bots) may subscribe with their own "
                "consumer group and answer on `decision.submitted`.",
            ),
        ),
    )


def _reported(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.reported,
        model=ExecutionReported,
        summary="The sandbox's report on one attempt: started, completed or failed.",
        description=(
            "Internal report from the sandbox to the orchestrator. `outcome: completed` "
            "carries the agent's `result`, `outcome: failed` carries `error`. `epoch` names "
            "the attempt reported on."
        ),
        producers=(
            Party(
                "sandbox",
                "Publishes `started` before running an attempt (`event_id` "
                "`<execution_id>:started:<epoch>`) and `completed` or `failed` after it "
                "(`<execution_id>:finished:<epoch>`).",
            ),
        ),
        consumers=(
            Party(
                "orchestrator",
                "Moves the execution to `running`, `completed` or `error`; reports of any "
                "other epoch than the current one are ignored.",
            ),
        ),
    )


def _status(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.status,
        model=ExecutionStatusChanged,
        summary="An execution's status changed.",
        description=(
            "Every status transition of every execution, published by the orchestrator for "
            "anyone to follow. `sequence` orders them: drop a message whose "
            "`sequence` is not newer than the last one seen for that execution."
        ),
        producers=(
            Party(
                "orchestrator",
                "Publishes each transition with `event_id` "
                "`<execution_id>:status:<sequence>`. When an event changes no status it "
                "announces the current one again, same sequence, `previous_status: null`.",
            ),
        ),
        consumers=(Party(EXTERNAL, "Outside systems may follow executions here."),),
    )


def _activity(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.activity,
        model=ExecutionActivity,
        summary="What an execution's live streams show (internal).",
        description=(
            "Pushed to every gateway process, which fans it out to its open execution "
            "streams: a `change` (the whole audit trail and the execution's view) after "
            "every stored change, or a batch of `progress` (node updates, model tokens). "
            "Internal: outside systems follow `execution.status`. Gateways listen without a "
            "consumer group, from the end of the topic; a stream reads the store once when "
            "it opens, so a short retention is enough."
        ),
        producers=(
            Party(
                "orchestrator",
                "Publishes a `change` after each event it handles (`event_id` "
                "`<execution_id>:changed:<version>`), a redelivered one included.",
            ),
            Party(
                "sandbox",
                "Publishes each batch of progress after storing it, before it reports the "
                "run (`event_id` `<execution_id>:progress:<first key>`).",
            ),
        ),
        consumers=(
            Party(
                "gateway",
                "Every process hears every message (no consumer group).",
                grouped=False,
            ),
        ),
    )


def _deadlines(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.deadlines,
        model=ReviewDeadlineReached,
        summary="A suspension reached its remind or escalate deadline unreviewed.",
        description=(
            "Published by the orchestrator's deadline sweeper, once per suspension and kind "
            "(`event_id` `<execution_id>:<suspension_id>:<kind>`; a repeat after a crash "
            "carries the same id). Expiry is not announced here: it is a status change "
            "(`expired`) or the declared decision taken by the system."
        ),
        producers=(
            Party(
                "orchestrator",
                "The sweeper publishes it, then records the deadline as fired in the "
                "execution's audit trail.",
            ),
        ),
        consumers=(
            Party(
                "notifier",
                "Reminds the channels told of the suspension, or tells the `escalate_to` "
                "channels; one delivery per (execution, suspension, kind, channel).",
            ),
            Party(EXTERNAL, "Outside systems may follow deadlines here."),
        ),
    )


def _run_webhooks(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.run_webhooks,
        model=RunWebhookDue,
        summary="A run that asked for a webhook ended, at an interrupt or with its execution.",
        description=(
            "Published by the orchestrator with the outcome that ended the run, and again "
            "with the next outcomes while the run is the execution's latest or the one before "
            "(`event_id` `<execution_id>:webhook:<epoch>` every time). Only runs started with "
            "a `webhook` (LangGraph's runs API) have one; `payload` is LangGraph's webhook "
            "body but `webhook_sent_at`."
        ),
        producers=(
            Party("orchestrator", "Derives it from the stored execution after each outcome."),
        ),
        consumers=(
            Party(
                "notifier",
                "Stores one delivery per run, then POSTs `payload` to `url`, signed as its "
                "webhooks are, retried with backoff, dead-lettered and listed as notifications.",
            ),
        ),
    )


def _dead_letters(t: Topics) -> TopicDoc:
    return TopicDoc(
        topic=t.dead_letters,
        model=MessageDeadLettered,
        summary="A message that could not be processed, with the reason.",
        description=(
            "Each consuming service publishes here the messages it can never process (not "
            "valid JSON, an unknown type or version, an invalid field, rejected by the "
            "domain, or failing again and again) and skips them. `payload` holds the "
            "original message. No service consumes this topic: it is for operators."
        ),
        producers=tuple(
            Party(service, f"Dead-letters what its consumers of {topics_} cannot process.")
            for service, topics_ in (
                (
                    "orchestrator",
                    f"`{t.requested}`, `{t.decisions}`, `{t.suspended}` and `{t.reported}`",
                ),
                ("sandbox", f"`{t.dispatched}`"),
                ("notifier", f"`{t.suspended}`, `{t.deadlines}` and `{t.run_webhooks}`"),
            )
        ),
        consumers=(Party(EXTERNAL, "Operators and alerting."),),
        key=(
            "The key of the original message (normally its `execution_id`), or the dead "
            "letter's own `event_id` when the original had none."
        ),
    )


TOPIC_DOCS: tuple[Callable[[Topics], TopicDoc], ...] = (
    _requested,
    _decisions,
    _cancellations,
    _thread_deletions,
    _dispatched,
    _suspended,
    _reported,
    _status,
    _activity,
    _deadlines,
    _run_webhooks,
    _dead_letters,
)


def topic_docs(topics: Topics | None = None) -> list[TopicDoc]:
    """What each topic carries and who produces and consumes it, in ``Topics.all()`` order."""
    t = topics or Topics()
    by_topic = {doc.topic: doc for doc in (make(t) for make in TOPIC_DOCS)}
    missing = [name for name in t.all() if name not in by_topic]
    if missing:
        raise RuntimeError(f"topics without documentation in scripts/asyncapi/topics.py: {missing}")
    return [by_topic[name] for name in t.all()]
