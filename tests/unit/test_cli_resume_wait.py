"""``interlock executions resume`` waits until the agent has acted on the decision
(interlock/client/api.py, ``past_suspension``): until the orchestrator applies it, the gateway
still shows the suspension that was answered, which must not count as the outcome."""

from __future__ import annotations

import pytest

from interlock.client.api import past_suspension


@pytest.mark.parametrize(
    ("execution", "acted"),
    [
        ({"status": "suspended", "generation": 1}, False),  # the answered one, still shown
        ({"status": "running", "generation": 1}, False),
        ({"status": "pending", "generation": 1}, False),
        ({"status": "suspended", "generation": 2}, True),  # its next review
        ({"status": "completed", "generation": 1}, True),
        ({"status": "error", "generation": 1}, True),
        ({"status": "cancelled", "generation": 1}, True),
    ],
)
def test_a_resume_waits_past_the_suspension_it_answered(
    execution: dict[str, object], acted: bool
) -> None:
    assert past_suspension(1)(execution) is acted
