"""Traces: one execution is one connected picture, from the HTTP request through every bus hop
to the sandbox's graph nodes and durable steps and to the notifier's delivery, and the resume
(a trace of its own, started by the reviewer's request) links back to the execution's origin.

The four services' handlers run in one process on the in-memory bus (tests/unit/inprocess.py)
behind the real gateway app; spans go to the SDK's in-memory exporter."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from services.gateway import app as gateway_app
from services.gateway.app import GatewaySettings, create_app
from services.notifier.channels.webhook import new_secret
from services.notifier.delivery import Dispatcher
from shared import tracing
from shared.events import utc_now
from shared.notifications.model import Notification
from shared.store.api_keys import Role, create_key
from tests.e2e.effects_server import Handler
from tests.unit.inprocess import World, in_process_world

EXPORTER = InMemorySpanExporter()
_exporting = False
WS = "w1"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    # The global provider is set once per process (by the first service built in this test
    # process, or here); the exporter is added to it once.
    global _exporting
    # With export off the services' provider keeps span ids only (tracing.IdsOnly): these tests
    # export to memory, so they ask for the spans to be recorded.
    tracing.record_spans()
    if not _exporting:
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        _exporting = True
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@pytest.fixture
def effects(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("INTERLOCK_EFFECTS_URL", f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()


class RecordingChannel:
    def __init__(self) -> None:
        self.sent: list[Notification] = []

    async def send(self, notification: Notification) -> None:
        self.sent.append(notification)


@pytest.fixture
async def traced_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, effects: None
) -> AsyncIterator[World]:
    channels = tmp_path / "notifications.toml"
    channels.write_text(
        '[channels.ops]\ntype = "webhook"\nurl = "http://127.0.0.1:9/hook"\n'
        'secrets_env = "OPS_SECRETS"\n'
    )
    monkeypatch.setenv("INTERLOCK_NOTIFICATIONS_FILE", str(channels))
    monkeypatch.setenv("OPS_SECRETS", new_secret())
    async with in_process_world(tmp_path, monkeypatch) as world:
        yield world


@pytest.fixture
async def client(traced_world: World, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    monkeypatch.setattr(gateway_app, "configure_logging", lambda *args, **kwargs: None)
    settings = GatewaySettings(kafka_bootstrap_servers="unused:9092", topic_prefix="mem.")
    app = create_app(settings, store=traced_world.store, publisher=traced_world.bus)
    _, secret = await create_key(
        traced_world.store.api_keys, project_id="p1", role=Role.OWNER, name="tracing"
    )
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gateway", headers=headers
    ) as http:
        yield http


def by_id(spans: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def parent_of(span: ReadableSpan, index: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return index.get(span.parent.span_id) if span.parent is not None else None


def one(spans: list[ReadableSpan], name: str, **attributes: Any) -> ReadableSpan:
    found = [
        s
        for s in spans
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, f"{len(found)} spans named {name!r} {attributes}: {names(spans)}"
    return found[0]


def names(spans: list[ReadableSpan]) -> list[str]:
    return sorted(s.name for s in spans)


def assert_connected(trace_spans: list[ReadableSpan]) -> ReadableSpan:
    """One root, and every other span's parent is a span of the same trace: no orphan."""
    index = by_id(trace_spans)
    roots = [s for s in trace_spans if s.parent is None]
    assert len(roots) == 1, f"roots: {names(roots)}"
    orphans = [s.name for s in trace_spans if s.parent is not None and parent_of(s, index) is None]
    assert orphans == [], f"spans whose parent is missing: {orphans}"
    return roots[0]


def assert_hops(
    trace_spans: list[ReadableSpan], topic: str, consumer: str, count: int
) -> list[ReadableSpan]:
    """Each of the consumer's ``count`` spans of ``topic`` is the child of the producer span
    that published its message."""
    index = by_id(trace_spans)
    processed = [
        s
        for s in trace_spans
        if s.name == f"mem.{topic} process"
        and (s.attributes or {}).get("interlock.consumer") == consumer
    ]
    assert len(processed) == count, f"{consumer} handled {len(processed)} of {topic}"
    for process in processed:
        assert process.kind is SpanKind.CONSUMER
        sent = parent_of(process, index)
        assert sent is not None and sent.name == f"mem.{topic} publish"
        assert sent.kind is SpanKind.PRODUCER
    return processed


def assert_hop(trace_spans: list[ReadableSpan], topic: str, consumer: str) -> ReadableSpan:
    return assert_hops(trace_spans, topic, consumer, 1)[0]


def assert_graph_spans(
    trace_spans: list[ReadableSpan], run: ReadableSpan, nodes: list[str], cached: list[bool]
) -> None:
    """Nodes are children of the run span; each ``send_email`` step is a child of its node."""
    index = by_id(trace_spans)
    node_spans = [s for s in trace_spans if s.name.startswith("node ")]
    assert sorted(s.name for s in node_spans) == sorted(f"node {n}" for n in nodes)
    assert all(parent_of(s, index) is run for s in node_spans)
    steps = sorted(
        (s for s in trace_spans if s.name == "step send_email"), key=lambda s: s.start_time or 0
    )
    assert [(s.attributes or {})["interlock.step.cached"] for s in steps] == cached
    for step in steps:
        node = parent_of(step, index)
        assert node is not None and node.name in {"node stage", "node confirm"}


async def test_an_execution_is_one_trace_per_segment_linked_across_the_resume(
    traced_world: World, client: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    invoked = await client.post(
        f"/api/v1/projects/p1/workspaces/{WS}/invoke",
        json={"agent": "outreach", "message": "1 stage"},
    )
    assert invoked.status_code == 202, invoked.text
    execution_id = invoked.json()["execution_id"]
    assert (await traced_world.execution(execution_id)).status.value == "suspended"

    dispatcher = Dispatcher(
        traced_world.store.notifications,
        {"ops": RecordingChannel()},
        clock=utc_now,
        owner="test",
        max_attempts=3,
    )
    assert await dispatcher.run_once() == 1

    first = list(spans.get_finished_spans())
    server = one(first, "POST /api/v1/projects/{project_id}/workspaces/{workspace_id}/invoke")
    assert server.kind is SpanKind.SERVER
    origin = [s for s in first if s.context.trace_id == server.context.trace_id]
    assert assert_connected(origin) is server
    assert_hop(origin, "execution.requested", "orchestrator:mem.execution.requested")
    sandbox = assert_hop(origin, "execution.dispatched", "sandbox:mem.execution.dispatched")
    run = one(origin, "run outreach")
    assert parent_of(run, by_id(origin)) is sandbox
    assert not run.links, "the first segment is the origin: nothing to link to"
    assert_graph_spans(origin, run, ["plan", "stage"], cached=[False])
    stage = one(origin, "node stage")
    assert (stage.attributes or {}).get("langgraph.interrupted") is True
    assert stage.status.status_code is not StatusCode.ERROR
    assert_hop(origin, "execution.suspended", "orchestrator:mem.execution.suspended")
    notified = assert_hop(origin, "execution.suspended", "notifier:mem.execution.suspended")
    delivery = one(origin, "notify ops")
    assert parent_of(delivery, by_id(origin)) is notified
    # The execution keeps the origin's context: the request's server span.
    stored = (await traced_world.execution(execution_id)).trace_context
    assert stored is not None
    assert stored["traceparent"].split("-")[1:3] == [
        format(server.context.trace_id, "032x"),
        format(server.context.span_id, "016x"),
    ]

    spans.clear()
    decided = await client.post(
        f"/api/v1/projects/p1/executions/{execution_id}/resume",
        params={"workspace_id": WS},
        json={"decision": "approve"},
    )
    assert decided.status_code in (200, 202), decided.text
    assert (await traced_world.execution(execution_id)).status.value == "completed"

    second = list(spans.get_finished_spans())
    resume = one(second, "POST /api/v1/projects/{project_id}/executions/{execution_id}/resume")
    assert resume.context.trace_id != server.context.trace_id
    later = [s for s in second if s.context.trace_id == resume.context.trace_id]
    assert assert_connected(later) is resume
    assert_hop(later, "decision.submitted", "orchestrator:mem.decision.submitted")
    sandbox = assert_hop(later, "execution.dispatched", "sandbox:mem.execution.dispatched")
    run = one(later, "run outreach")
    assert parent_of(run, by_id(later)) is sandbox
    assert (run.attributes or {})["interlock.dispatch"] == "resume"
    assert [(link.context.trace_id, link.context.span_id) for link in run.links] == [
        (server.context.trace_id, server.context.span_id)
    ]
    # The interrupted node runs again from its first line: its email comes from the step cache.
    assert_graph_spans(later, run, ["stage", "confirm"], cached=[True, False])
    # "started" and "completed"; each status change of this segment is announced for outside
    # systems (no service consumes execution.status).
    assert_hops(later, "execution.reported", "orchestrator:mem.execution.reported", 2)
    assert [s.name for s in later].count("mem.execution.status publish") == 3


async def test_handler_log_lines_carry_the_trace_id_of_their_span(
    traced_world: World, client: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    with structlog.testing.capture_logs(
        processors=[structlog.contextvars.merge_contextvars, tracing.log_fields]
    ) as logs:
        invoked = await client.post(
            f"/api/v1/projects/p1/workspaces/{WS}/invoke",
            json={"agent": "outreach", "message": "1 stage"},
        )
    assert invoked.status_code == 202
    consumer_spans = {
        format(s.context.span_id, "016x"): s
        for s in spans.get_finished_spans()
        if s.kind is SpanKind.CONSUMER
    }
    handled = [line for line in logs if line["event"] == "event.handled"]
    assert len(handled) >= 4
    for line in handled:
        # The line was logged inside the span of the very message it summarises.
        span = consumer_spans[line["span_id"]]
        attributes = span.attributes or {}
        assert attributes["interlock.consumer"] == line["consumer"]
        assert attributes["interlock.event_id"] == line["event_id"]
        assert line["trace_id"] == format(span.context.trace_id, "032x")
        assert line["execution_id"] == invoked.json()["execution_id"]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_export_is_off_unless_the_standard_variables_ask_for_it(
    environ: dict[str, str], expected: list[str]
) -> None:
    assert tracing.exporter_names(environ) == expected


def test_an_unsupported_exporter_is_refused_at_start_up() -> None:
    with pytest.raises(tracing.TracingConfigError, match="jaeger"):
        tracing.exporter_names({"OTEL_TRACES_EXPORTER": "jaeger"})


def test_every_service_gets_span_ids_for_its_log_lines_even_with_export_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    tracing.configure_tracing("gateway")  # installs the provider, unless a test did before
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    with tracing.span("work") as current:
        assert current.get_span_context().is_valid
        assert tracing.current_carrier() is not None


def test_no_carrier_is_stored_outside_a_trace() -> None:
    assert tracing.current_carrier() is None
    assert tracing.link_to(None, "execution.origin") == []
    assert tracing.link_to({"traceparent": "garbage"}, "execution.origin") == []


def test_with_export_off_spans_get_ids_and_record_nothing() -> None:
    tracer = TracerProvider(sampler=tracing.IdsOnly()).get_tracer("test")
    was = tracing._recording
    tracing.record_spans(False)
    try:
        with (
            tracer.start_as_current_span("parent") as parent,
            tracer.start_as_current_span("child", attributes={"a": 1}) as child,
        ):
            assert child.get_span_context().is_valid
            assert not child.is_recording()
            # One trace: a log line of the child and of its parent name the same trace.
            assert child.get_span_context().trace_id == parent.get_span_context().trace_id
        tracing.record_spans(True)
        with tracer.start_as_current_span("recorded") as recorded:
            assert recorded.is_recording()
    finally:
        tracing.record_spans(was)
