"""The Prometheus metrics of every service, defined once (``docs/observability.md``).

Module-level on the default registry, as ``prometheus_client`` intends: a metric is a
process-wide counter, not a client, so it holds no connection and does no I/O at import time.
Each metric is declared with the services that measure it (``measured``), and a process serves
only those of the services it runs (``registry_of``): the gateway on its health port, the
consumers on theirs (``shared/health.py``), ``interlock dev`` all four's. So no process serves a
series it never moves (an unlabelled gauge would read a constant 0 there, as the gateway's
``interlock_pending_reviews`` once did). Counters are per process; Prometheus sums the replicas.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.metrics import MetricWrapperBase

GATEWAY, ORCHESTRATOR, SANDBOX, NOTIFIER = "gateway", "orchestrator", "sandbox", "notifier"
SERVICES = (GATEWAY, ORCHESTRATOR, SANDBOX, NOTIFIER)
CONSUMERS = (ORCHESTRATOR, SANDBOX, NOTIFIER)
"""The services that consume from the bus (``shared/bus.py``'s ``Consumer``)."""

M = TypeVar("M", bound=MetricWrapperBase)

MEASURED_BY: dict[MetricWrapperBase, frozenset[str]] = {}
"""Each metric, and the services whose code moves it."""


def measured(by: Iterable[str], metric: M) -> M:
    """Declare that ``by`` (service names) measure ``metric``; returns it."""
    services = frozenset(by)
    if not services or not services <= set(SERVICES):
        raise ValueError(f"unknown services {sorted(services)} for {metric}")
    MEASURED_BY[metric] = services
    return metric


def registry_of(*services: str) -> CollectorRegistry:
    """What a process running ``services`` serves on ``/metrics``: the metrics they measure and
    the process's own (CPU, memory, garbage collection). The values are the default registry's
    (which the tests read): only what is served differs between processes."""
    unknown = set(services) - set(SERVICES)
    if unknown or not services:
        raise ValueError(f"unknown services {sorted(unknown)}")
    registry = CollectorRegistry()
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)
    for metric, by in MEASURED_BY.items():
        if by & set(services):
            registry.register(metric)
    return registry


HANDLED_EVENTS = measured(
    CONSUMERS,
    Counter(
        "interlock_handled_events_total",
        "Messages a consumer handled, by outcome (ok, retry, failed, dead_letter).",
        ["consumer", "topic", "outcome"],
    ),
)
HANDLER_SECONDS = measured(
    CONSUMERS,
    Histogram(
        "interlock_handler_seconds",
        "Time a consumer's domain handler took for one message, whatever its outcome.",
        ["consumer"],
    ),
)
CONSUMER_IN_FLIGHT = measured(
    CONSUMERS,
    Gauge(
        "interlock_consumer_in_flight",
        "Messages a subscription of this process is handling now, each of a different execution (at"
        " most INTERLOCK_CONSUMER_CONCURRENCY).",
        ["consumer"],
    ),
)
CONSUMER_HELD = measured(
    CONSUMERS,
    Gauge(
        "interlock_consumer_held",
        "Messages a subscription of this process has fetched and not finished: in flight, or"
        " waiting behind an earlier message of their execution. At INTERLOCK_CONSUMER_BUFFER it"
        " stops fetching (back-pressure).",
        ["consumer"],
    ),
)
DEAD_LETTERS = measured(
    CONSUMERS,
    Counter(
        "interlock_dead_letters_total",
        "Messages a consumer sent to the dead-letter topic.",
        ["consumer"],
    ),
)
TRANSITIONS = measured(
    [ORCHESTRATOR],
    Counter(
        "interlock_transitions_total",
        "Status transitions the orchestrator stored (after its compare-and-set succeeded).",
        ["from_status", "to_status"],
    ),
)
REVIEW_WAIT_SECONDS = measured(
    [ORCHESTRATOR],
    Histogram(
        "interlock_review_wait_seconds",
        "Time from a suspension to its decision being applied by the orchestrator.",
        buckets=(
            1,
            10,
            60,
            5 * 60,
            15 * 60,
            60 * 60,
            4 * 60 * 60,
            12 * 60 * 60,
            24 * 60 * 60,
            3 * 24 * 60 * 60,
            7 * 24 * 60 * 60,
        ),
    ),
)
STEP_CACHE = measured(
    [SANDBOX],
    Counter(
        "interlock_step_cache_total",
        "Durable steps served from the step cache (hit) or run (miss).",
        ["result"],
    ),
)
NOTIFICATION_DELIVERIES = measured(
    [NOTIFIER],
    Counter(
        "interlock_notification_deliveries_total",
        "Notification attempts, by channel and outcome (delivered, retry, dead).",
        ["channel", "outcome"],
    ),
)
DECISION_TO_RESUME_SECONDS = measured(
    [SANDBOX],
    Histogram(
        "interlock_decision_to_resume_seconds",
        "From a decision accepted by the gateway to the sandbox running the resumed graph.",
        buckets=(0.005, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    ),
)
EXECUTIONS = measured(
    [ORCHESTRATOR],
    Gauge(
        "interlock_executions",
        "Executions across projects in each status they have yet to leave (pending, running,"
        " suspended, resuming), counted by the orchestrator every INTERLOCK_METRICS_POLL_SECONDS"
        " (each replica reports the same count: aggregate with max). Ended executions are counted"
        " by interlock_transitions_total.",
        ["status"],
    ),
)
PENDING_REVIEWS = measured(
    [ORCHESTRATOR],
    Gauge(
        "interlock_pending_reviews",
        "Executions suspended and waiting for a reviewer's decision, across projects (as"
        " interlock_executions; aggregate with max).",
    ),
)
CONSUMER_LAG = measured(
    CONSUMERS,
    Gauge(
        "interlock_consumer_lag",
        "Messages of a partition not yet committed by a consumer group (the end offset minus the"
        " committed offset), measured by each replica of the group's service: aggregate with max.",
        ["group", "topic", "partition"],
    ),
)
AGENTS_UNLOADABLE = measured(
    [SANDBOX],
    Gauge(
        "interlock_agents_unloadable",
        "1 for each agent this sandbox could not load at start-up (its executions fail with the"
        " reason, logged as agent.unloadable); the other agents serve.",
        ["agent"],
    ),
)
CRON_TICKS = measured(
    [ORCHESTRATOR],
    Counter(
        "interlock_cron_ticks_total",
        "Crons' ticks, by outcome: fired (a run started), skipped (missed while no orchestrator"
        " ran, by the cron's catch-up policy, or past its end) or refused (its agent or input"
        " no longer accepted).",
        ["outcome"],
    ),
)
DEADLINES_FIRED = measured(
    [ORCHESTRATOR],
    Counter(
        "interlock_deadlines_fired_total",
        "Review deadlines the orchestrator fired, by kind (remind, escalate, expire).",
        ["kind"],
    ),
)
HTTP_REQUESTS = measured(
    [GATEWAY],
    Counter(
        "interlock_http_requests_total",
        "Gateway requests by method, route template and status code.",
        ["method", "route", "status"],
    ),
)
HTTP_REQUEST_SECONDS = measured(
    [GATEWAY],
    Histogram(
        "interlock_http_request_seconds",
        "Gateway request duration by method and route template (a stream lasts as long as it is"
        " open: leave the stream route out of latency queries).",
        ["method", "route"],
    ),
)
STORE_CONNECTIONS = measured(
    SERVICES,
    Counter(
        "interlock_store_connections",
        "Connections to the database the driver opened and closed (with why), and pool clears"
        " (shared/store/mongo/watch.py): steady growth under a steady load is churn.",
        ["event", "reason"],
    ),
)
STORE_COMMAND_SECONDS = measured(
    SERVICES,
    Histogram(
        "interlock_store_command_seconds",
        "Time the database took for one command, by command and collection"
        " (shared/store/mongo/watch.py).",
        ["command", "collection"],
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    ),
)
