"""The invariants checked after every chaos scenario, over everything that happened. Pure: it
reads an ``Observation`` (what the store holds, what the effects service applied, what the HTTP
clients were answered, how the processes fared) and returns a ``Verdict``; no I/O.

The numbered invariants are the issue's (docs/reliability.md):

1. no loss: every 2xx invoke has its execution; every 2xx decision led to exactly one resume of
   the suspension it answered, with the answer the client was told was accepted; every
   execution ends terminal or suspended;
2. no duplicate side effect: one applied effect per idempotency key, and no more keys for an
   execution than the steps its history ran (a re-sent email under a new key is a duplicate);
3. one decision per suspension (the store, and at most one 2xx per suspension);
4. monotonic history: transitions chain from ``pending`` through allowed moves, decisions'
   suspensions only grow, no event applied twice, every applied effect has its step record;
5. nothing stuck: no execution left pending / running / resuming once the run settled;
6. bounded resources: no process restarts beyond the faults injected, RSS within budget;
7. clear errors: every 4xx is problem+json, no 5xx other than a 503 with ``Retry-After``, no
   request left without an answer by a gateway that is up;
8. conversations (the scenarios that hold them): every turn a client sent is its thread's turn,
   once, in the order sent, completed; each turn's state holds exactly the messages before it,
   in order, its reply once; a turn ran only once the one before it had ended.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from services.orchestrator.state_machine import ALLOWED_TRANSITIONS
from shared.domain.execution import Execution, ExecutionStatus
from shared.domain.threads import turn_execution_id

S = ExecutionStatus
UNSETTLED = frozenset({S.PENDING, S.RUNNING, S.RESUMING})

DEFAULT_RSS_BUDGET_MB = 800.0
"""Per service process. A sandbox with LangChain and LangGraph loaded sits near 250 MB."""


@dataclass(frozen=True)
class HttpRecord:
    """One answer the scenario's clients got (or the transport error instead of one)."""

    method: str
    path: str
    status: int | None
    """None: no HTTP answer (connection refused or reset: the gateway was down)."""
    content_type: str = ""
    retry_after: str | None = None
    execution_id: str | None = None
    generation: int | None = None
    decision: str | None = None
    """The accepted answer of a 2xx resume, as the gateway echoed it."""
    client_error: bool = False
    """The scenario sent a malformed request on purpose (a 4xx is then the right answer)."""
    timed_out: bool = False
    """No answer within the client's timeout from a gateway that was up: a hang."""


@dataclass(frozen=True)
class EffectCall:
    key: str
    applied: bool


@dataclass(frozen=True)
class ProcessStats:
    service: str
    restarts: int
    peak_rss_mb: float


Message = tuple[str, str]
"""One message of a thread's state, as ``(type, content)``: ``("human", "hello")``."""


@dataclass
class ConversationRecord:
    """One conversation a scenario's client held (a session, which is a LangGraph thread): what
    it sent and was answered, and what the gateway showed of the thread once the run settled."""

    project_id: str
    workspace_id: str
    thread_id: str
    sent: list[str] = field(default_factory=list)
    """The human messages, one per turn, in the order sent."""
    decisions: dict[int, str] = field(default_factory=dict)
    """Turn -> the decision the client was told was accepted for its review."""
    accepted: list[tuple[int, str]] = field(default_factory=list)
    """(turn, execution id) the gateway answered for each message sent, in the order sent."""
    finished: bool = False
    """The client saw its last turn complete before its deadline."""
    problems: list[str] = field(default_factory=list)
    """Answers no correct server gives (a 409 for an enqueued turn, a turn holding another
    text than the one sent)."""
    listed: list[tuple[int, str, str]] = field(default_factory=list)
    """At the end: the session's turns as the gateway lists them, (turn, execution id, status)."""
    states: dict[int, list[Message]] = field(default_factory=dict)
    """At the end: each completed turn's own state (its execution's result), by turn."""
    final: list[Message] | None = None
    """At the end: the thread's state (LangGraph's ``threads.get_state``)."""
    history: list[int] | None = None
    """At the end: how many messages each state of the thread's history holds, newest first."""


def expected_reply(sent: list[str], turn: int, decision: str | None) -> str:
    """What agents/conversation.py answers turn ``turn`` of ``sent``: its text, every human
    message before it in order, and the reviewer's word when the turn waited for one."""
    reply = f"turn {turn}: you said {sent[turn - 1]!r}; before: {sent[: turn - 1]!r}"
    return reply if decision is None else f"{reply}; reviewer said {decision}"


def expected_state(conversation: ConversationRecord, turns: int) -> list[Message]:
    """The state after ``turns`` turns: each human message followed by its reply."""
    state: list[Message] = []
    for turn in range(1, turns + 1):
        state.append(("human", conversation.sent[turn - 1]))
        decision = conversation.decisions.get(turn)
        state.append(("ai", expected_reply(conversation.sent, turn, decision)))
    return state


@dataclass
class Observation:
    executions: dict[str, Execution]
    http: list[HttpRecord]
    effects: list[EffectCall]
    steps: dict[str, list[str]]
    """Execution id -> the keys of its stored durable steps."""
    processes: list[ProcessStats]
    faults_injected: int
    """Process deaths the scenario caused on purpose (fault points fired, signals sent)."""
    rss_budget_mb: float = DEFAULT_RSS_BUDGET_MB
    tracked: set[str] = field(default_factory=set)
    """The executions this scenario's clients created (2xx invokes); the store may hold others
    of an earlier scenario on the same database."""
    conversations: list[ConversationRecord] = field(default_factory=list)
    """The conversations the scenario's clients held (their turns are in ``tracked`` too)."""


@dataclass
class Verdict:
    executions: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    server_errors: int = 0
    unavailable: int = 0
    """503 answers with Retry-After: allowed while a dependency is down."""
    unanswered: int = 0
    """Requests that got no HTTP answer (the gateway process was down)."""
    violations: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def add(self, invariant: str, detail: str) -> None:
        self.violations[invariant].append(detail)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["violations"] = {k: v for k, v in self.violations.items() if v}
        data["ok"] = self.ok
        return data


def check(observation: Observation) -> Verdict:
    verdict = Verdict()
    ids = observation.tracked or set(observation.executions)
    verdict.executions = len(ids)
    _no_loss(observation, ids, verdict)
    _no_duplicate_effects(observation, ids, verdict)
    _one_decision_per_suspension(observation, ids, verdict)
    _monotonic_history(observation, ids, verdict)
    _nothing_stuck(observation, ids, verdict)
    _bounded_resources(observation, verdict)
    _clear_errors(observation, verdict)
    for conversation in observation.conversations:
        _conversation(conversation, observation.executions, verdict)
    return verdict


def _no_loss(observation: Observation, ids: set[str], verdict: Verdict) -> None:
    executions = observation.executions
    for record in observation.http:
        if record.status is None or not 200 <= record.status < 300 or not record.execution_id:
            continue
        execution = executions.get(record.execution_id)
        if execution is None:
            verdict.lost += 1
            verdict.add("1.no-loss", f"{record.path}: {record.status} but nothing stored")
            continue
        if record.generation is None:
            continue  # an invoke: its execution exists
        answered = [d for d in execution.decisions if d.suspension_id == record.generation]
        if len(answered) != 1:
            verdict.lost += 1 if not answered else 0
            verdict.add(
                "1.no-loss",
                f"{record.execution_id}: decision for suspension {record.generation} got"
                f" {record.status}, {len(answered)} applied",
            )
        elif record.decision is not None and answered[0].decision != record.decision:
            verdict.lost += 1
            verdict.add(
                "1.no-loss",
                f"{record.execution_id}: suspension {record.generation} accepted"
                f" {record.decision!r} but applied {answered[0].decision!r}",
            )
    for execution_id in ids:
        if execution_id not in executions:
            verdict.lost += 1
            verdict.add("1.no-loss", f"{execution_id}: created by a 2xx invoke, not stored")


def expected_effects(execution: Execution) -> int | None:
    """How many distinct effects the outreach agent's history implies at most: one email per
    suspension (sent before its interrupt), plus the confirmation when the last review approved.
    A run still under way may have sent the email of a suspension not recorded yet: one more.
    None when the history does not say (an error, another agent)."""
    if execution.agent != "outreach" or execution.status is S.ERROR:
        return None
    suspensions = sum(
        1 for a in execution.audit if a.action == "transition" and a.to_status is S.SUSPENDED
    )
    last = execution.last_decision
    confirmed = execution.status is S.COMPLETED and last is not None and last.decision == "approve"
    in_flight = execution.status in UNSETTLED
    return suspensions + int(confirmed) + int(in_flight)


def _no_duplicate_effects(observation: Observation, ids: set[str], verdict: Verdict) -> None:
    applied: Counter[str] = Counter(c.key for c in observation.effects if c.applied)
    for key, count in applied.items():
        if count > 1:
            verdict.duplicated += count - 1
            verdict.add("2.no-duplicate-effect", f"{key}: applied {count} times")
    keys_of: dict[str, set[str]] = defaultdict(set)
    for call in observation.effects:
        keys_of[call.key.split(":", 1)[0]].add(call.key)
    for execution_id in ids:
        execution = observation.executions.get(execution_id)
        if execution is None:
            continue
        expected = expected_effects(execution)
        keys = keys_of.get(execution_id, set())
        if expected is not None and len(keys) > expected:
            verdict.duplicated += len(keys) - expected
            verdict.add(
                "2.no-duplicate-effect",
                f"{execution_id}: {len(keys)} distinct effects, its history implies {expected}",
            )


def _one_decision_per_suspension(observation: Observation, ids: set[str], verdict: Verdict) -> None:
    for execution_id in ids:
        execution = observation.executions.get(execution_id)
        if execution is None:
            continue
        per = Counter(d.suspension_id for d in execution.decisions)
        for suspension_id, count in per.items():
            if count > 1:
                verdict.duplicated += count - 1
                verdict.add(
                    "3.one-decision", f"{execution_id}: {count} decisions for {suspension_id}"
                )
    accepted = Counter(
        (r.execution_id, r.generation)
        for r in observation.http
        if r.generation is not None and r.status is not None and 200 <= r.status < 300
    )
    for (execution_id, generation), count in accepted.items():
        if count > 1:
            verdict.duplicated += count - 1
            verdict.add(
                "3.one-decision", f"{execution_id}: {count} 2xx answers for suspension {generation}"
            )


def _monotonic_history(observation: Observation, ids: set[str], verdict: Verdict) -> None:
    for execution_id in ids:
        execution = observation.executions.get(execution_id)
        if execution is None:
            continue
        status = S.PENDING
        seen: set[tuple[str | None, str, str | None]] = set()
        for entry in execution.audit:
            if entry.action != "transition":
                continue
            assert entry.to_status is not None
            if (
                entry.from_status is not status
                or entry.to_status not in ALLOWED_TRANSITIONS[status]
            ):
                verdict.add(
                    "4.monotonic-history",
                    f"{execution_id}: {entry.from_status} -> {entry.to_status} after {status}",
                )
            mark = (entry.event_id, entry.action, entry.to_status.value)
            if entry.event_id is not None and mark in seen:
                verdict.duplicated += 1
                verdict.add("4.monotonic-history", f"{execution_id}: {mark} applied twice")
            seen.add(mark)
            status = entry.to_status
        if status is not execution.status:
            verdict.add(
                "4.monotonic-history",
                f"{execution_id}: audit ends {status.value}, stored {execution.status.value}",
            )
        suspensions = [d.suspension_id for d in execution.decisions]
        if suspensions != sorted(set(suspensions)) or any(s > execution.epoch for s in suspensions):
            verdict.add(
                "4.monotonic-history",
                f"{execution_id}: decisions' suspensions {suspensions}, epoch {execution.epoch}",
            )
        applied = {
            c.key for c in observation.effects if c.applied and c.key.startswith(execution_id)
        }
        missing = applied - set(observation.steps.get(execution_id, []))
        if missing and execution.status is not S.ERROR:
            verdict.add(
                "4.monotonic-history", f"{execution_id}: effects without a step: {sorted(missing)}"
            )


def _nothing_stuck(observation: Observation, ids: set[str], verdict: Verdict) -> None:
    for execution_id in sorted(ids):
        execution = observation.executions.get(execution_id)
        if execution is not None and execution.status in UNSETTLED:
            verdict.stuck += 1
            verdict.add(
                "5.nothing-stuck",
                f"{execution_id}: still {execution.status.value} (epoch {execution.epoch})",
            )


def _bounded_resources(observation: Observation, verdict: Verdict) -> None:
    restarts = sum(p.restarts for p in observation.processes)
    if restarts > observation.faults_injected:
        verdict.add(
            "6.bounded-resources",
            f"{restarts} restarts for {observation.faults_injected} faults injected: "
            + ", ".join(f"{p.service} x{p.restarts}" for p in observation.processes if p.restarts),
        )
    for process in observation.processes:
        if process.peak_rss_mb > observation.rss_budget_mb:
            verdict.add(
                "6.bounded-resources",
                f"{process.service}: {process.peak_rss_mb:.0f} MB RSS,"
                f" budget {observation.rss_budget_mb:.0f} MB",
            )


def _clear_errors(observation: Observation, verdict: Verdict) -> None:
    for record in observation.http:
        if record.status is None:
            verdict.unanswered += 1
            if record.timed_out:
                verdict.add("7.clear-errors", f"{record.method} {record.path}: no answer (hang)")
            continue
        problem = record.content_type.startswith("application/problem+json")
        if 400 <= record.status < 500 and not problem:
            verdict.add(
                "7.clear-errors", f"{record.method} {record.path}: {record.status} not problem+json"
            )
        if record.status == 503 and record.retry_after and problem:
            verdict.unavailable += 1
        elif record.status >= 500:
            verdict.server_errors += 1
            verdict.add(
                "7.clear-errors",
                f"{record.method} {record.path}: {record.status}"
                + (" (after a malformed request)" if record.client_error else ""),
            )


CONVERSATIONS = "8.conversations"


def _conversation(
    conversation: ConversationRecord, executions: dict[str, Execution], verdict: Verdict
) -> None:
    """Nothing lost, duplicated or reordered in one conversation, nothing stuck in it. A turn
    still pending, running or resuming is counted stuck by ``_nothing_stuck`` already."""

    def violation(detail: str) -> None:
        verdict.add(CONVERSATIONS, f"{conversation.thread_id}: {detail}")

    for problem in conversation.problems:
        violation(problem)
    count = len(conversation.sent)
    ids = {
        turn: turn_execution_id(
            conversation.project_id, conversation.workspace_id, conversation.thread_id, turn
        )
        for turn in range(1, count + 1)
    }
    for sent, (turn, execution_id) in enumerate(conversation.accepted, start=1):
        if (turn, execution_id) != (sent, ids[sent]):
            violation(f"message {sent} accepted as turn {turn} ({execution_id}), not {ids[sent]}")
    if not conversation.finished:
        violation(f"the client did not see turn {count} complete before its deadline")

    listed = Counter(turn for turn, _, _ in conversation.listed)
    for turn, times in sorted(listed.items()):
        if turn not in ids or times > 1:
            extra = times if turn not in ids else times - 1
            verdict.duplicated += extra
            violation(f"turn {turn} listed {times} times; {count} messages were sent")
    if sorted(listed) != list(range(1, len(listed) + 1)):
        violation(f"turns listed {sorted(listed)}: not 1..{len(listed)}")
    status_of = {turn: (eid, status) for turn, eid, status in conversation.listed}
    completed: set[int] = set()
    for turn, execution_id in ids.items():
        if turn not in status_of:
            verdict.lost += 1
            violation(f"turn {turn} ({execution_id}) is not listed")
            continue
        listed_id, status = status_of[turn]
        if listed_id != execution_id:
            violation(f"turn {turn} listed as {listed_id}, not {execution_id}")
        if status == S.COMPLETED.value:
            completed.add(turn)
            continue
        if status in {s.value for s in UNSETTLED}:
            pass  # counted by _nothing_stuck
        elif status == S.SUSPENDED.value:
            verdict.stuck += 1
        else:
            verdict.lost += 1
        violation(f"turn {turn} ({execution_id}) ended {status}, not completed")

    for turn in sorted(completed):
        state = conversation.states.get(turn)
        wanted = expected_state(conversation, turn)
        if state is None:
            violation(f"turn {turn} completed without a state")
        elif state != wanted:
            violation(f"turn {turn}'s state: {_difference(state, wanted)}")
    wanted = expected_state(conversation, count)
    final = conversation.final
    if final is None:
        violation("no thread state read")
    else:
        said = Counter(content for kind, content in final if kind == "human")
        replies = Counter(content for kind, content in final if kind == "ai")
        for turn in range(1, count + 1):
            text, reply = wanted[2 * turn - 2][1], wanted[2 * turn - 1][1]
            if said[text] > 1 or replies[reply] > 1:
                times = max(said[text], replies[reply])
                verdict.duplicated += times - 1
                violation(f"turn {turn} is {times} times in the thread's state")
            elif said[text] == 0 and turn in completed:
                # Completed, yet the conversation does not hold it: the turn is lost.
                verdict.lost += 1
                violation(f"turn {turn} completed, but its message is not in the thread's state")
            elif replies[reply] == 0 and turn in completed:
                # Its message is there, its reply is not the expected one: the turn saw
                # other messages before it than the ones sent (reordered, or one lost).
                violation(f"turn {turn}'s reply is not {reply!r}")
        if final != wanted:
            violation(f"the thread's state: {_difference(final, wanted)}")
    if conversation.history is not None:
        sizes = [2 * turn for turn in range(count, 0, -1)]
        if conversation.history != sizes:
            violation(f"history of {conversation.history} messages per state, not {sizes}")

    for turn in range(2, count + 1):
        before, this = executions.get(ids[turn - 1]), executions.get(ids[turn])
        if before is None or this is None:
            continue
        ended = next(
            (a.at for a in before.audit if a.action == "transition" and _terminal(a.to_status)),
            None,
        )
        dispatched = next((a.at for a in this.audit if a.action == "dispatched"), None)
        if dispatched is not None and (ended is None or dispatched < ended):
            violation(
                f"turn {turn} dispatched at {dispatched.isoformat()}, before turn {turn - 1}"
                f" ended ({ended.isoformat() if ended else 'never'}): two runs overlapped"
            )


def _terminal(status: ExecutionStatus | None) -> bool:
    return status is not None and status.is_terminal


def _difference(state: list[Message], wanted: list[Message]) -> str:
    """Where a state departs from the expected one: its size, and its first differing message."""
    at = next(
        (i for i, (got, want) in enumerate(zip(state, wanted, strict=False)) if got != want),
        min(len(state), len(wanted)),
    )
    got = f"{state[at][0]}: {state[at][1]!r}" if at < len(state) else "nothing"
    want = f"{wanted[at][0]}: {wanted[at][1]!r}" if at < len(wanted) else "nothing"
    return f"{len(state)} messages, not {len(wanted)}; message {at + 1} is {got}, not {want}"
