"""Composition root of the gateway: ``create_app(settings)`` builds the FastAPI application.

Clients (the store, the Kafka producer) are created and connected in the lifespan, never at
import time. Tests may pass a store and a publisher to run without infrastructure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from pydantic import Field

from services.gateway.intake import Intake
from services.gateway.problems import install_problem_handlers
from services.gateway.routes import build_router
from shared.agents import load_registry
from shared.bus import EventPublisher, KafkaPublisher, create_broker
from shared.logging import configure_logging
from shared.settings import CommonSettings
from shared.store.mongo import MongoStore
from shared.store.ports import Store

SERVICE = "gateway"


class GatewaySettings(CommonSettings):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)


def create_app(
    settings: GatewaySettings | None = None,
    *,
    store: Store | None = None,
    publisher: EventPublisher | None = None,
) -> FastAPI:
    settings = settings or GatewaySettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    registry = load_registry(settings.agents_file)
    store_ = store or MongoStore.connect(settings.mongodb_uri, settings.mongodb_database)
    broker = create_broker(settings, SERVICE) if publisher is None else None
    publisher_ = publisher or KafkaPublisher(broker)  # type: ignore[arg-type]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store_.ensure_indexes()
        if broker is not None:
            await broker.start()
        try:
            yield
        finally:
            if broker is not None:
                await broker.stop()
            await store_.close()

    app = FastAPI(
        title="Interlock",
        version="0.1.0",
        summary="Durable human-in-the-loop execution for LangGraph agents.",
        lifespan=lifespan,
    )
    install_problem_handlers(app)
    intake = Intake(store=store_, publisher=publisher_, topics=settings.topics, registry=registry)
    app.include_router(build_router(intake, registry))

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> dict[str, str]:
        await store_.ping()
        return {"status": "ready"}

    return app
