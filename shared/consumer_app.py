"""The process around a consumer service (orchestrator, sandbox, notifier): its broker, store,
health listener and periodic loops, started and stopped in one order for all three.

Up: the health listener, then the store (pinged, its indexes ensured unless
``INTERLOCK_STORE_INIT_AT_START`` is off), then the service's own start, then the consumers, the
loops and the one "started" log line. Down: the consumers first (nothing new arrives), then the
loops, then the store and the health listener.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import FastStream

from shared import metrics
from shared.background import background_hooks
from shared.health import Details, health_hooks
from shared.kafka_bus import KafkaBus
from shared.logging import announce_started
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore

Hook = Callable[[], Awaitable[None]]


def consumer_app(
    service: str,
    settings: CommonSettings,
    bus: KafkaBus,
    store: MongoStore,
    *,
    loops: tuple[Hook, ...] = (),
    start: Hook | None = None,
    ready_details: Details | None = None,
) -> FastStream:
    """``loops``: the service's periodic work (sweeps, gauges) beside the broker's lag gauge;
    ``start``: what it needs done once its store answers and before it consumes;
    ``ready_details``: what its readiness probe says beside its status."""
    lag = bus.lag_monitor()
    start_loops, stop_loops = background_hooks(
        *loops, lambda: lag.run_forever(settings.metrics_poll_seconds)
    )

    async def open_store() -> None:
        await store.ping()
        if settings.store_init_at_start:
            await store.ensure_indexes()
        if start is not None:
            await start()

    health_start, health_stop = health_hooks(
        settings,
        bus.broker.ping,
        store.ping,
        metrics=metrics.registry_of(service),
        details=ready_details,
    )
    return FastStream(
        bus.broker,
        on_startup=[*health_start, open_store],
        after_startup=[bus.start_consumers, start_loops, announce_started(service)],
        on_shutdown=[bus.stop_consumers, stop_loops],
        after_shutdown=[store.close, *health_stop],
    )
