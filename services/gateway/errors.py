"""The gateway's own refusals. Each carries its HTTP problem (shared/errors.py), which the one
handler in services/gateway/problems.py renders; the domain's (decisions, separation of duties,
cancellation) carry theirs the same way."""

from __future__ import annotations

from typing import Any

from shared.errors import InterlockError


class UnknownAgent(InterlockError):
    """An agent this deployment does not run: a value the client can correct, like a decision
    outside a review's allowed list, so a 400 rather than a 404."""

    problem_type = "unknown-agent"
    problem_title = "Unknown agent"
    problem_status = 400

    def __init__(self, agent: str, known: list[str]) -> None:
        super().__init__(
            f"agent {agent!r} is not registered; registered agents: {', '.join(known)}"
        )
        self.known = known

    def problem_extensions(self) -> dict[str, Any]:
        return {"agents": self.known}


class UnknownInputKeys(InterlockError):
    """The input names a key the agent's graph does not have: LangGraph would drop it in
    silence and the graph run without it, so it is refused, naming the keys it has."""

    problem_type = "unknown-input-field"
    problem_title = "Unknown input field"
    problem_status = 400

    def __init__(self, agent: str, unknown: list[str], known: list[str]) -> None:
        super().__init__(
            f"input: {', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not"
            f" in the input of agent {agent!r}; its input has: {', '.join(known)}"
        )


class IdempotencyKeyReused(InterlockError):
    """The idempotency key of an earlier, different request."""

    problem_type = "idempotency-key-reused"
    problem_title = "Idempotency key reused"
    problem_status = 409


class ExecutionNotFound(InterlockError):
    """No such execution in the workspace asked about (or none the key may see)."""

    problem_type = "execution-not-found"
    problem_title = "Execution not found"
    problem_status = 404

    def __init__(self, execution_id: str) -> None:
        super().__init__(f"no execution {execution_id} here")
        self.execution_id = execution_id


class DecisionConflict(InterlockError):
    """Another decision took the suspension; ``winner`` says which."""

    problem_type = "decision-conflict"
    problem_title = "Decision already submitted"
    problem_status = 409

    def __init__(self, message: str, winner: dict[str, Any]) -> None:
        super().__init__(message)
        self.winner = winner

    def problem_extensions(self) -> dict[str, Any]:
        return {"winning_decision": self.winner}
