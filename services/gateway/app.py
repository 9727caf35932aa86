"""Composition root of the gateway: ``create_app(settings)`` builds the FastAPI application.

Clients (the store, the Kafka producer) are created and connected in the lifespan, never at
import time. Tests may pass a store and a publisher to run without infrastructure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Response
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import Field, SecretStr, model_validator

from services.gateway.action_links import install_action_links
from services.gateway.http_metrics import HttpMetricsMiddleware
from services.gateway.intake import Intake
from services.gateway.limits import install_limits
from services.gateway.notifications import build_notifications_router
from services.gateway.problems import install_problem_handlers
from services.gateway.routes import build_router
from services.gateway.stream import install_stream
from services.gateway.web import install_review_page
from shared.agents import load_registry
from shared.bus import EventPublisher, KafkaPublisher, create_broker
from shared.logging import configure_logging
from shared.settings import CommonSettings
from shared.store.api_keys import Role, create_key
from shared.store.mongo import MongoStore
from shared.store.ports import Store
from shared.tracing import configure_tracing

SERVICE = "gateway"
DEV_PROJECT = "demo"


class GatewaySettings(CommonSettings):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    max_json_depth: int = Field(default=32, ge=1, le=256)
    """Python's json.loads stops near 1000 levels; keep well below that."""
    max_json_string: int = Field(default=100_000, ge=1)
    rate_limit_per_second: float = Field(default=20.0, gt=0)
    """Per API key (per client address without one), per gateway process."""
    rate_limit_burst: int = Field(default=40, ge=1)
    action_link_secret: SecretStr | None = None
    """Accepts the approve / reject links notifications carry (the notifier's same setting)."""
    stream_poll_seconds: float = Field(default=0.5, gt=0, le=30)
    """How often an open execution stream looks for news (FerretDB has no change streams)."""
    dev_api_key: str | None = None
    """Development only: an owner key of project ``demo`` created at start-up (``make dev``).
    Refused in any other environment."""

    @model_validator(mode="after")
    def _dev_key_only_in_development(self) -> GatewaySettings:
        if self.dev_api_key is not None and self.environment != "development":
            raise ValueError(
                "INTERLOCK_DEV_API_KEY is a development bootstrap; it is refused in"
                f" {self.environment!r}: create keys with `interlock keys create`"
            )
        return self


def create_app(
    settings: GatewaySettings | None = None,
    *,
    store: Store | None = None,
    publisher: EventPublisher | None = None,
) -> FastAPI:
    settings = settings or GatewaySettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    registry = load_registry(settings.agents_file)
    # Whoever creates the store closes it: a store passed in outlives this app.
    owns_store = store is None
    store_ = store or MongoStore.connect(
        settings.mongodb_uri,
        settings.mongodb_database,
        operation_timeout_ms=settings.mongodb_timeout_ms,
        slow_command_ms=settings.mongodb_slow_command_ms,
    )
    broker = create_broker(settings, SERVICE) if publisher is None else None
    publisher_ = publisher or KafkaPublisher(broker)  # type: ignore[arg-type]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store_.ensure_indexes()
        if settings.dev_api_key is not None:
            await create_key(
                store_.api_keys,
                project_id=DEV_PROJECT,
                role=Role.OWNER,
                name="development",
                secret=settings.dev_api_key,
            )
        if broker is not None:
            await broker.start()
        try:
            yield
        finally:
            if broker is not None:
                await broker.stop()
            if owns_store:
                await store_.close()

    app = FastAPI(
        title="Interlock",
        version="0.1.0",
        summary="Durable human-in-the-loop execution for LangGraph agents.",
        lifespan=lifespan,
    )
    install_problem_handlers(app)
    install_limits(
        app,
        max_body_bytes=settings.max_body_bytes,
        max_json_depth=settings.max_json_depth,
        max_json_string=settings.max_json_string,
        rate_limit_per_second=settings.rate_limit_per_second,
        rate_limit_burst=settings.rate_limit_burst,
    )
    # Added after the limits, so it runs before them: requests they turn away are counted too.
    app.add_middleware(HttpMetricsMiddleware)
    intake = Intake(store=store_, publisher=publisher_, topics=settings.topics, registry=registry)
    app.include_router(build_router(intake, registry, store_.api_keys))
    install_stream(app, intake, store_.api_keys, poll_seconds=settings.stream_poll_seconds)
    app.include_router(build_notifications_router(store_.notifications, store_.api_keys))
    install_review_page(app)
    secret = settings.action_link_secret
    install_action_links(app, intake, secret.get_secret_value() if secret else None)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> dict[str, str]:
        await store_.ping()
        return {"status": "ready"}

    # No API key: Prometheus scrapes it on the cluster network (docs/observability.md), and the
    # rate limit exempts it (limits.EXEMPT_PATHS) so scrapes are never turned away.
    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    # A server span per request (continuing a caller's traceparent); probes and scrapes are
    # left out, and so are the per-message ASGI spans that would drown a stream's trace.
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"]
    )
    return app
