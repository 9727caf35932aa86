import pytest

from shared.domain.decisions import (
    DecisionNotAllowed,
    NotSuspended,
    StaleSuspension,
    canonical_decision,
)
from shared.domain.execution import ExecutionStatus
from tests.factories import pending, suspended


def test_decision_matches_allowed_values_without_regard_to_case() -> None:
    assert canonical_decision(suspended(), "APPROVE", None) == "approve"
    assert canonical_decision(suspended(allowed=["Escalate"]), " escalate ", None) == "Escalate"


def test_decision_outside_allowed_list_names_the_allowed_values() -> None:
    with pytest.raises(DecisionNotAllowed) as caught:
        canonical_decision(suspended(), "maybe", None)
    assert caught.value.allowed == ["approve", "reject"]
    assert "approve, reject" in str(caught.value)


def test_without_declared_decisions_any_decision_is_accepted() -> None:
    assert canonical_decision(suspended(allowed=[]), "ship it", None) == "ship it"


@pytest.mark.parametrize(
    "status", [s for s in ExecutionStatus if s is not ExecutionStatus.SUSPENDED]
)
def test_only_a_suspended_execution_takes_a_decision(status: ExecutionStatus) -> None:
    execution = pending().model_copy(update={"status": status})
    with pytest.raises(NotSuspended) as caught:
        canonical_decision(execution, "approve", None)
    assert caught.value.status is status


def test_a_decision_for_an_earlier_suspension_is_stale() -> None:
    with pytest.raises(StaleSuspension):
        canonical_decision(suspended(), "approve", suspension_id=7)
    assert canonical_decision(suspended(), "approve", suspension_id=1) == "approve"
