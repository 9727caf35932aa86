"""What a handled event logs: one summary line with its outcome and duration, every line bound
to the execution, its project and the event, and no custom header value anywhere."""

from __future__ import annotations

import json

import structlog
from structlog.testing import capture_logs

from shared.bus import Consumer, Delivery
from shared.events import AgentInput, ExecutionRequested, decode_event, encode_event

SECRET_HEADER_VALUE = "Bearer end-user-token-never-logged"


class NoPublisher:
    async def publish(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("nothing is dead-lettered here")


async def test_a_handled_event_logs_one_bound_summary_line_and_no_custom_header() -> None:
    log = structlog.get_logger("agent-code")

    async def handle(event: ExecutionRequested) -> None:
        log.info("agent.work", step="lookup")

    consumer = Consumer(
        name="orchestrator:execution.requested",
        decode=lambda raw: decode_event(raw, (ExecutionRequested,)),
        handle=handle,
        publisher=NoPublisher(),
        dead_letter_topic="execution.dead_lettered",
    )
    event = ExecutionRequested(
        execution_id="exec-logs",
        project_id="acme",
        workspace_id="support",
        agent="refund-approval",
        input=AgentInput(message="Refund claim CLM-4821"),
    )
    delivery = Delivery(
        topic="execution.requested",
        partition=3,
        offset=17,
        key="exec-logs",
        body=encode_event(event),
        headers={"x-interlock-custom-authorization": SECRET_HEADER_VALUE},
    )
    # The services' logging merges the bound context into every line (shared/logging.py).
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        await consumer.deliver(delivery)
    [work, summary] = logs
    for line in (work, summary):
        assert line["execution_id"] == "exec-logs" and line["project_id"] == "acme"
        assert line["event_id"] == event.event_id
        assert (line["topic"], line["partition"], line["offset"]) == ("execution.requested", 3, 17)
    assert summary["event"] == "event.handled" and summary["outcome"] == "ok"
    assert summary["duration_ms"] >= 0
    assert SECRET_HEADER_VALUE not in json.dumps(logs, default=str)
