"""OpenTelemetry traces: one execution is one connected picture across the four services.

- The gateway's HTTP requests are server spans (FastAPI instrumentation, which also continues a
  caller's ``traceparent``).
- Every publish is a producer span whose context rides in the message headers (W3C
  ``traceparent`` / ``tracestate``, the global propagator); every handled message is a consumer
  span, child of the producer span that sent it (``shared/bus.py``), on Kafka and on the
  in-process bus alike.
- The sandbox adds a span per agent run, per graph node and per durable step.
- The notifier's deliveries are children of the handling that enqueued them: the outbox stores
  that context with each delivery.
- A resume (a decision days later) starts a new trace at its HTTP request; its sandbox run is
  linked to the trace that created the execution, whose context is stored with the execution.

Spans always get real ids (the SDK's provider is installed in every process), so every log
line inside one carries its trace id. Export is **off by default**: spans leave the process
only when the standard variables ask for it (``OTEL_TRACES_EXPORTER`` = ``otlp`` and/or
``console``, or an ``OTEL_EXPORTER_OTLP_ENDPOINT``). The SDK reads the rest itself
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
``OTEL_EXPORTER_OTLP_*``, ``OTEL_BSP_*``); ``OTEL_SDK_DISABLED=true`` turns the SDK off (the
API's no-op spans then still carry a caller's context through).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TraceState

TRACER_NAME = "interlock"
EXPORTERS = ("otlp", "console")

Carrier = dict[str, str]
"""A serialised trace context (``traceparent`` and maybe ``tracestate``): what headers carry
and what documents store. Its keys have no dots, so FerretDB stores it as it is."""


class TracingConfigError(ValueError):
    pass


_tracer: tuple[trace.TracerProvider, trace.Tracer] | None = None
"""The tracer of the provider it came from: the SDK builds a new tracer (and instrumentation
scope) on every ``get_tracer``, which was 4% of the orchestrator's CPU at saturation."""


def tracer() -> trace.Tracer:
    # Checked against the global provider on each use: a provider installed later (tests,
    # start-up) is picked up.
    global _tracer
    provider = trace.get_tracer_provider()
    cached = _tracer
    if cached is None or cached[0] is not provider:
        cached = _tracer = (provider, provider.get_tracer(TRACER_NAME))
    return cached[1]


def exporter_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters the environment asks for; empty means tracing stays off."""
    env = os.environ if environ is None else environ
    if sdk_disabled(env):
        return []
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not named:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    names = [n.strip() for n in named.split(",") if n.strip() and n.strip() != "none"]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={named!r}: unsupported {unknown}; use otlp, console or none"
        )
    return names


_installed: bool | None = None
"""None until ``configure_tracing`` ran; then whether it exports."""
_recording = False
"""Whether spans are recorded when no exporter was configured (``record_spans``)."""


def record_spans(on: bool = True) -> None:
    """Record every span even with export off: for whoever attaches a span processor of their
    own (the tests' in-memory exporter)."""
    global _recording
    _recording = on


class IdsOnly(Sampler):
    """With export off, a span still gets its ids (every log line inside it carries them, and
    the trace context crosses services in the messages' headers) but records nothing: no
    attributes, no events, no processor work. Measured at saturation, recording spans nobody
    exported was 5-10% of each service's busy time (issue 20)."""

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        inherited = parent.trace_state if parent.is_valid else None
        if _recording:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, inherited)
        return SamplingResult(Decision.DROP, None, inherited)

    def get_description(self) -> str:
        return "IdsOnly"


def sdk_disabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def configure_tracing(service: str) -> bool:
    """Install the SDK's tracer provider, once per process (the embedded mode runs four services
    in one): spans get real ids, which every log line inside them carries, so one execution's
    lines can be found across services even with no tracing backend. Spans are exported only
    when the environment asks for it. Returns whether they are."""
    global _installed
    if _installed is not None:
        return _installed
    names = exporter_names()
    if sdk_disabled():
        _installed = False
        return False
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    attributes = (
        {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: f"interlock-{service}"}
    )
    # Exported spans follow the standard sampler settings (OTEL_TRACES_SAMPLER); unexported
    # ones only need their ids.
    sampler = None if names else IdsOnly()
    provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler)
    for name in names:
        exporter: SpanExporter
        if name == "otlp":
            # Imported only when asked for: most processes never load the exporter.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            # One compact JSON object per line, so span lines can be told from log lines.
            exporter = ConsoleSpanExporter(
                service_name=f"interlock-{service}",
                formatter=lambda span: span.to_json(indent=None) + os.linesep,
            )
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _installed = bool(names)
    return _installed


# --- propagation ------------------------------------------------------------------------------


def current_carrier() -> Carrier | None:
    """The current span's context, serialised; None outside a valid span (tracing off and no
    caller's context): nothing worth storing."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: Carrier = {}
    propagate.inject(carrier)
    return carrier or None


def context_of(carrier: Mapping[str, Any] | None) -> otel_context.Context:
    """The context a carrier (message headers, a stored carrier) holds; an empty one if none."""
    if not carrier:
        return otel_context.Context()
    headers = {str(k).lower(): _text(v) for k, v in carrier.items()}
    return propagate.extract(headers, context=otel_context.Context())


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def link_to(carrier: Mapping[str, Any] | None, relation: str) -> list[Link]:
    """A link to the span a stored carrier names, unless it is in the current trace already."""
    linked = trace.get_current_span(context_of(carrier)).get_span_context()
    if not linked.is_valid:
        return []
    current = trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == linked.trace_id:
        return []
    return [Link(linked, {"interlock.link": relation})]


@contextmanager
def publishing(topic: str, event_type: str, key: str, headers: dict[str, str]) -> Iterator[None]:
    """A producer span around one publish; its context is written into ``headers``. With
    export off nobody sees a producer span: the current context (the handler's span) goes into
    the headers instead, so the consumer's span is in the same trace (what its log lines need),
    for none of a span's cost (20 us a message here, 21 messages an execution)."""
    if not (_installed or _recording):
        propagate.inject(headers)
        yield
        return
    with tracer().start_as_current_span(
        f"{topic} publish",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.destination.name": topic,
            "messaging.kafka.message.key": key,
            "interlock.event_type": event_type,
        },
    ):
        propagate.inject(headers)
        yield


@contextmanager
def consuming(
    headers: Mapping[str, Any], *, consumer: str, topic: str, partition: int, offset: int
) -> Iterator[Span]:
    """A consumer span for one handled message, child of the producer span that sent it."""
    with tracer().start_as_current_span(
        f"{topic} process",
        context=context_of(headers),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.destination.name": topic,
            "messaging.destination.partition.id": str(partition),
            "messaging.kafka.offset": offset,
            "messaging.consumer.group.name": consumer.split(":", 1)[0],
            "interlock.consumer": consumer,
        },
    ) as current:
        yield current


def mark_failed(description: str) -> None:
    """Mark the current span as failed (a message dead-lettered is an error of its handling,
    though no exception leaves the handler)."""
    trace.get_current_span().set_status(Status(StatusCode.ERROR, description))


@contextmanager
def span(
    name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    links: list[Link] | None = None,
    parent: otel_context.Context | None = None,
) -> Iterator[Span]:
    with tracer().start_as_current_span(
        name, context=parent, attributes=dict(attributes or {}), links=links
    ) as current:
        yield current


def log_fields(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: the current trace and span ids on every line logged inside a span."""
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event_dict.setdefault("trace_id", format(span_context.trace_id, "032x"))
        event_dict.setdefault("span_id", format(span_context.span_id, "016x"))
    return event_dict
