"""Both buses are one ``Bus``: the same publish headers (written once, ``shared/bus_headers.py``)
and the consumer lag as a capability a composition root asks for, not a type it checks."""

from __future__ import annotations

from pathlib import Path

from shared.bus import Delivery
from shared.bus_headers import publishing
from shared.consumer_lag import ConsumerLag
from shared.events import AgentInput, ExecutionRequested
from shared.inprocess_bus import InProcessBus
from shared.kafka_bus import KafkaBus
from shared.settings import CommonSettings
from tests.direct_bus import DirectBus


def requested() -> ExecutionRequested:
    return ExecutionRequested(
        execution_id="exec-headers",
        project_id="p",
        workspace_id="w",
        agent="a",
        input=AgentInput(message="hi"),
    )


def test_the_headers_carry_the_callers_the_types_and_the_trace_context() -> None:
    with publishing(requested(), "t", "k", {"x-interlock-custom": "sealed"}) as headers:
        pass
    assert headers["x-interlock-custom"] == "sealed"
    assert headers["content-type"] == "application/json"
    assert headers["event-type"] == "execution.requested"


async def test_the_in_process_and_the_direct_bus_send_the_same_headers(tmp_path: Path) -> None:
    heard: dict[str, Delivery] = {}
    inprocess, direct = InProcessBus(tmp_path / "bus.sqlite"), DirectBus()
    for name, bus in (("inprocess", inprocess), ("direct", direct)):
        bus.add_listener("t", lambda d, name=name: heard.__setitem__(name, d))
    await inprocess.start()
    try:
        for bus in (inprocess, direct):
            await bus.publish(requested(), "t", key="k", headers={"x-custom": "1"})
    finally:
        await inprocess.stop()

    def fixed(delivery: Delivery) -> dict[str, object]:
        # The trace context differs per publish; that there is one is the shared part.
        return {k: v for k, v in delivery.headers.items() if k not in ("traceparent", "tracestate")}

    assert (
        fixed(heard["inprocess"])
        == fixed(heard["direct"])
        == {
            "x-custom": "1",
            "content-type": "application/json",
            "event-type": "execution.requested",
        }
    )


def test_only_kafka_keeps_the_consumer_lag_gauge(tmp_path: Path) -> None:
    settings = CommonSettings()
    kafka = KafkaBus(settings, "test")
    kafka.add_consumer("t", "g", _Nothing())
    monitor = kafka.lag_monitor()
    assert isinstance(monitor, ConsumerLag)
    assert InProcessBus(tmp_path / "bus.sqlite").lag_monitor() is None


class _Nothing:
    name = "nothing"

    async def deliver(self, delivery: Delivery) -> None:
        return None
