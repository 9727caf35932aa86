"""What an execution's live stream shows, pushed to every gateway: the ``execution.activity``
topic (internal; outside systems follow ``execution.status``).

One message model with two kinds of content, both keyed by the execution id so one execution's
messages stay in order on one partition:

- a ``change``, from the orchestrator after every stored change of an execution (and again when
  a redelivered event finds nothing to change, in case the first announcement was lost): the
  whole audit trail and the execution as the API shows it. A gateway's stream turns the trail
  entries its client has not seen into events, so a lost or repeated announcement costs
  nothing: the next one carries the whole trail;
- ``progress``, from the sandbox after each batch of progress it stored: node updates and model
  tokens, best-effort like the progress log itself.

A change that stops a run (the execution suspended, or ended) also carries the execution as
stored, so a gateway's request waiting for that run (LangGraph's ``runs.wait``, ``join``) answers
from the message instead of reading the store once per stopped run.

The sandbox publishes a run's progress before it reports the run, and the orchestrator
announces the change only after that report: on the one partition, a stream sees a run's
progress before the status that ends it, as it does when it reads the store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import to_json

from shared.domain.execution import AuditEntry, Execution, ExecutionStatus
from shared.events import EventModel, Identifier, decode_event
from shared.store.progress import ProgressEntry
from shared.views import ExecutionView

CHANGED_IN_HEADER = "interlock-changed-in"
"""On a change (not on progress): the project of the execution, so a gateway with nobody
watching that project's workspaces drops the message without decoding it."""

MAX_VIEW_BYTES = 256 * 1024
"""A view bigger than this (a huge input or result) is left out of its announcement; a stream
then reads the execution once from the store. Keeps announcements well under Kafka's limit."""


class ExecutionChange(BaseModel):
    workspace_id: Identifier
    status: ExecutionStatus
    audit: list[AuditEntry]
    """The whole trail: a stream that missed an announcement loses nothing."""
    view: dict[str, Any] | None = None
    """The execution as ``GET .../executions/{id}`` shows it (without approvals); None when it
    was too big to carry (``MAX_VIEW_BYTES``)."""
    execution: dict[str, Any] | None = None
    """When the change stops a run (``stops_a_run``): the execution as stored, but its trail
    (``audit``, above), so what a waiter answers needs no store read. None on other changes,
    when its state was too big to carry (``MAX_VIEW_BYTES``), and from orchestrators of the
    release before (the gateway then reads the store, as it did)."""

    def stored(self) -> Execution | None:
        """The stored execution this change carries (None: read it from the store, as for one
        that does not validate: a waiter then reads, it never fails on the message)."""
        if self.execution is None:
            return None
        try:
            return Execution.model_validate({**self.execution, "audit": self.audit})
        except ValidationError:
            return None


class ProgressItem(BaseModel):
    key: str = Field(max_length=64)
    kind: str = Field(max_length=64)
    data: dict[str, Any]

    def entry(self) -> ProgressEntry:
        return ProgressEntry(key=self.key, kind=self.kind, data=self.data)


class ExecutionActivity(EventModel):
    type: Literal["execution.activity"] = "execution.activity"
    version: Literal[1] = 1
    project_id: Identifier
    change: ExecutionChange | None = None
    """From the orchestrator: the execution after a change."""
    progress: list[ProgressItem] | None = None
    """From the sandbox: a batch of the run's progress."""

    @model_validator(mode="after")
    def _one_kind(self) -> ExecutionActivity:
        if (self.change is None) == (self.progress is None):
            raise ValueError("carries exactly one of 'change' or 'progress'")
        return self

    @classmethod
    def changed(cls, execution: Execution, *, causation_id: str | None = None) -> ExecutionActivity:
        view: dict[str, Any] | None = ExecutionView.of(execution).model_dump(mode="json")
        if view is not None and _too_big(view):
            view = None
        stored: dict[str, Any] | None = None
        if stops_a_run(execution.status) and not _state_too_big(execution):
            stored = execution.model_dump(mode="json", exclude={"audit"})
        return cls(
            # One id per stored version: a re-announcement is recognisably the same news.
            event_id=f"{execution.execution_id}:changed:{execution.version}",
            execution_id=execution.execution_id,
            project_id=execution.project_id,
            change=ExecutionChange(
                workspace_id=execution.workspace_id,
                status=execution.status,
                audit=execution.audit,
                view=view,
                execution=stored,
            ),
            causation_id=causation_id,
            correlation_id=execution.execution_id,
        )

    @classmethod
    def progressed(
        cls, project_id: str, execution_id: str, entries: list[ProgressEntry]
    ) -> ExecutionActivity:
        return cls(
            # The first entry's key names the batch: a retried publish is the same news.
            event_id=f"{execution_id}:progress:{entries[0].key}",
            execution_id=execution_id,
            project_id=project_id,
            progress=[ProgressItem(key=e.key, kind=e.kind, data=e.data) for e in entries],
            correlation_id=execution_id,
        )


def decode_activity(raw: bytes) -> ExecutionActivity:
    """Parse one ``execution.activity`` message (``EventDecodeError`` with the reason).

    A gateway decodes every message its waits and streams watch, several per execution: the
    bytes go to pydantic's own JSON parser at once (about half the time of ``json.loads`` and
    a validation after it). Whatever that refuses, or a message without its ``event_id``, is
    decoded again the general way, which says why."""
    try:
        activity = ExecutionActivity.model_validate_json(raw)
    except ValidationError:
        activity = None
    if activity is None or "event_id" not in activity.model_fields_set:
        return decode_event(raw, (ExecutionActivity,))
    return activity


def stops_a_run(status: ExecutionStatus) -> bool:
    """A change to this status ends the run under way: what a waiter for that run waits for."""
    return status.is_terminal or status is ExecutionStatus.SUSPENDED


def _state_too_big(execution: Execution) -> bool:
    # The parts that grow with the graph's state; the rest is a few KiB at most.
    suspension = execution.suspension
    heavy = [
        execution.input,
        execution.result,
        execution.stopped_values,
        None if suspension is None else (suspension.values, suspension.suspend_context),
    ]
    return len(to_json(heavy)) > MAX_VIEW_BYTES


def _too_big(view: dict[str, Any]) -> bool:
    # Only the input, the result and the suspension context can grow large: sizing them alone
    # (in pydantic's Rust encoder) is cheaper than encoding every announcement twice.
    heavy = [view.get("input"), view.get("result"), view.get("suspend_context")]
    return len(to_json(heavy)) > MAX_VIEW_BYTES
