"""Topic names and their partition counts.

The three names ``execution.requested``, ``execution.suspended`` and ``decision.submitted`` are
fixed by the product's design; outside systems publish to and subscribe to them directly. Every
message is keyed by ``execution_id`` so one execution's events stay in order on one partition.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PARTITIONS = 6
"""Upper bound on the replicas of one service that can share a topic's work."""


@dataclass(frozen=True)
class Topics:
    """The topic names for one deployment. ``prefix`` isolates test runs on a shared broker."""

    prefix: str = ""

    def _name(self, base: str) -> str:
        return f"{self.prefix}{base}"

    @property
    def requested(self) -> str:
        return self._name("execution.requested")

    @property
    def decisions(self) -> str:
        return self._name("decision.submitted")

    @property
    def dispatched(self) -> str:
        """Orchestrator -> sandbox: run or resume an execution (a command)."""
        return self._name("execution.dispatched")

    @property
    def suspended(self) -> str:
        return self._name("execution.suspended")

    @property
    def reported(self) -> str:
        """Sandbox -> orchestrator: an attempt started, completed or failed."""
        return self._name("execution.reported")

    @property
    def status(self) -> str:
        """Orchestrator -> anyone: every status transition of every execution."""
        return self._name("execution.status")

    @property
    def activity(self) -> str:
        """Orchestrator and sandbox -> every gateway: what live execution streams show
        (shared/activity.py). Internal; outside systems follow ``status``."""
        return self._name("execution.activity")

    @property
    def cancellations(self) -> str:
        """Gateway or any outside system -> orchestrator: stop an execution."""
        return self._name("execution.cancel_requested")

    @property
    def thread_deletions(self) -> str:
        """Gateway -> orchestrator: erase a deleted thread's turns (signed, as cancellations)."""
        return self._name("thread.delete_requested")

    @property
    def deadlines(self) -> str:
        """Orchestrator -> notifier: a suspension reached its remind or escalate deadline."""
        return self._name("review.deadline")

    @property
    def run_webhooks(self) -> str:
        """Orchestrator -> notifier: a run that asked for a webhook has ended."""
        return self._name("run.webhook")

    @property
    def dead_letters(self) -> str:
        """Messages that could not be processed, with the reason."""
        return self._name("execution.dead_lettered")

    def all(self) -> list[str]:
        return [
            self.requested,
            self.decisions,
            self.cancellations,
            self.thread_deletions,
            self.dispatched,
            self.suspended,
            self.reported,
            self.status,
            self.activity,
            self.deadlines,
            self.run_webhooks,
            self.dead_letters,
        ]
