"""Issue 35, item 3: a change that stops a run carries the execution as stored
(shared/activity.py), and a held LangGraph request (a wait, a join, a stream) answers from it
instead of reading the store once per stopped run (services/gateway/langgraph/carried.py). A
change from an orchestrator of the release before, which carries none, still sends the request
to the store: nothing a client sees changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.gateway.feed import ExecutionFeed, Watch
from services.gateway.langgraph.carried import advanced
from services.gateway.langgraph.service import LangGraphService
from services.gateway.stream import StreamBounds
from shared.activity import MAX_VIEW_BYTES, ExecutionActivity, decode_activity
from shared.bus import Delivery
from shared.domain.execution import Execution, ExecutionStatus
from shared.events import EventDecodeError, decode_event, encode_event
from shared.store.memory.api_keys import InMemoryApiKeys
from shared.store.progress import ProgressEntry
from tests.factories import SCOPE, pending, suspended

PROJECT = SCOPE["project_id"]
VALUES = {"messages": [{"type": "human", "content": "Refund claim CLM-4821"}]}


def waiting(values: dict[str, Any] | None = None, version: int = 3) -> Execution:
    """A turn stopped at its interrupt, with the state it stopped in."""
    execution = suspended("exec-1")
    assert execution.suspension is not None
    suspension = execution.suspension.model_copy(update={"values": values or VALUES})
    return execution.model_copy(update={"suspension": suspension, "version": version})


def completed(version: int = 6) -> Execution:
    return pending("exec-1").model_copy(
        update={
            "status": ExecutionStatus.COMPLETED,
            "epoch": 2,
            "version": version,
            "result": {"refund_id": "RF-1"},
        }
    )


def through_the_bus(activity: ExecutionActivity) -> ExecutionActivity:
    """What a gateway decodes of the message the orchestrator published."""
    return decode_activity(encode_event(activity))


def without_execution(activity: ExecutionActivity) -> ExecutionActivity:
    """The same change as an orchestrator of the release before announced it."""
    assert activity.change is not None
    change = activity.change.model_copy(update={"execution": None})
    return activity.model_copy(update={"change": change})


# --- what a change carries ------------------------------------------------------------------


def test_a_change_that_stops_a_run_carries_the_execution_as_stored() -> None:
    for stopped in (waiting(), completed()):
        heard = through_the_bus(ExecutionActivity.changed(stopped))
        assert heard.change is not None
        assert heard.change.stored() == stopped
        # The trail travels once, beside it.
        assert heard.change.execution is not None and "audit" not in heard.change.execution


def test_a_change_that_stops_nothing_carries_no_execution() -> None:
    running = pending("exec-1").model_copy(update={"status": ExecutionStatus.RUNNING, "epoch": 1})
    for changed in (pending("exec-1"), running):
        heard = through_the_bus(ExecutionActivity.changed(changed))
        assert heard.change is not None and heard.change.stored() is None


def test_a_carried_execution_that_does_not_validate_is_left_to_the_store() -> None:
    heard = through_the_bus(ExecutionActivity.changed(waiting()))
    assert heard.change is not None and heard.change.execution is not None
    broken = heard.change.model_copy(update={"execution": {**heard.change.execution, "epoch": "x"}})
    assert broken.stored() is None


def test_a_state_too_big_to_carry_is_left_to_the_store() -> None:
    big = waiting({"blob": "x" * (MAX_VIEW_BYTES + 1)})
    heard = through_the_bus(ExecutionActivity.changed(big))
    assert heard.change is not None and heard.change.stored() is None


# --- what a held request makes of it --------------------------------------------------------


def test_the_newest_carried_version_wins_and_older_ones_move_nothing_back() -> None:
    first, later = waiting(version=3), completed(version=6)
    announced = [ExecutionActivity.changed(e) for e in (later, first)]
    assert advanced(first, announced) == later
    assert advanced(later, [ExecutionActivity.changed(first)]) == later


def test_changes_that_stop_nothing_and_progress_leave_the_execution_as_it_was() -> None:
    running = pending("exec-1").model_copy(update={"status": ExecutionStatus.RUNNING, "epoch": 1})
    entry = ProgressEntry(key="k", kind="update", data={"node": "n"})
    arrived = [
        ExecutionActivity.changed(running),
        ExecutionActivity.progressed(PROJECT, "exec-1", [entry]),
    ]
    start = pending("exec-1")
    assert advanced(start, arrived) is start


def test_a_stopping_change_without_the_execution_asks_for_the_store() -> None:
    old = without_execution(ExecutionActivity.changed(waiting()))
    assert advanced(pending("exec-1"), [old]) is None


class CountingIntake:
    """The one call ``LangGraphService.wait`` may make: the reread."""

    def __init__(self, stored: Execution) -> None:
        self.stored = stored
        self.reads = 0

    async def get(self, project_id: str, workspace_id: str, execution_id: str) -> Execution:
        self.reads += 1
        return self.stored


def service_on(intake: CountingIntake) -> LangGraphService:
    bounds = StreamBounds(InMemoryApiKeys())
    return LangGraphService(intake, None, ExecutionFeed(), bounds)  # type: ignore[arg-type]


def heard(feed: ExecutionFeed, activity: ExecutionActivity) -> None:
    body = encode_event(activity)
    feed.heard(Delivery(topic="execution.activity", partition=0, offset=0, key="exec-1", body=body))


async def wait_hearing(
    intake: CountingIntake, announced: list[ExecutionActivity], epoch: int
) -> Execution:
    service = service_on(intake)
    feed = ExecutionFeed()
    watch: Watch
    with feed.watch(PROJECT, "exec-1") as watch:
        for activity in announced:
            heard(feed, activity)
        return await service.wait(watch, pending("exec-1"), epoch, seconds=5)


async def test_a_wait_answers_from_the_change_without_reading_the_store() -> None:
    stopped = waiting()
    intake = CountingIntake(stored=pending("exec-1"))  # a read would answer the wrong thing
    running = pending("exec-1").model_copy(update={"status": ExecutionStatus.RUNNING, "epoch": 1})
    announced = [ExecutionActivity.changed(running), ExecutionActivity.changed(stopped)]
    assert await wait_hearing(intake, announced, epoch=1) == stopped
    assert intake.reads == 0


async def test_a_wait_reads_the_store_when_the_change_carries_nothing() -> None:
    stopped = waiting()
    intake = CountingIntake(stored=stopped)
    announced = [without_execution(ExecutionActivity.changed(stopped))]
    assert await wait_hearing(intake, announced, epoch=1) == stopped
    assert intake.reads == 1


# --- decoding -------------------------------------------------------------------------------


def test_a_message_decodes_as_the_general_decoder_decodes_it() -> None:
    raw = encode_event(ExecutionActivity.changed(waiting()))
    assert decode_activity(raw) == decode_event(raw, (ExecutionActivity,))


def test_a_message_without_its_event_id_is_refused_with_the_reason() -> None:
    """pydantic's parser would give it a generated id (different on every redelivery)."""
    data = json.loads(encode_event(ExecutionActivity.changed(waiting())))
    del data["event_id"]
    with pytest.raises(EventDecodeError, match="event_id"):
        decode_activity(json.dumps(data).encode())
