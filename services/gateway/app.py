"""Composition root of the gateway: ``create_app(settings)`` builds the FastAPI application.

Clients (the store, the Kafka producer) are created and connected in the lifespan, never at
import time. Tests may pass a store and a publisher to run without infrastructure.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from faststream.kafka import KafkaBroker
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from pydantic import Field, SecretStr, field_validator, model_validator

from services.gateway.action_links import install_action_links
from services.gateway.auth import GatewayKeys, request_key_id, warn_if_development_key_present
from services.gateway.conversations import Conversations
from services.gateway.cors import cors_middleware, parse_origins
from services.gateway.crons import crons_router
from services.gateway.cursors import PageCursors
from services.gateway.feed import ExecutionFeed
from services.gateway.http_metrics import HttpMetricsMiddleware
from services.gateway.intake import Intake
from services.gateway.langgraph.assistants import build_assistants_router
from services.gateway.langgraph.cron_routes import build_cron_router
from services.gateway.langgraph.meta import build_meta_router
from services.gateway.langgraph.requests import MAX_TTL_MINUTES
from services.gateway.langgraph.routes import build_langgraph_router
from services.gateway.langgraph.service import LangGraphService
from services.gateway.langgraph.store_routes import build_store_router
from services.gateway.limits import install_limits
from services.gateway.notifications import build_notifications_router
from services.gateway.problems import install_problem_handlers
from services.gateway.proxied_json import JsonWhateverTypeMiddleware
from services.gateway.routes import build_router
from services.gateway.stream import StreamBounds, StreamLimits, install_stream
from services.gateway.web import SignInDefaults, install_api_docs, install_review_page
from shared import metrics
from shared.agents import AgentRegistry, load_registry
from shared.bus import EventPublisher, KafkaPublisher, ListenerHost, create_broker
from shared.custom_headers import SealingPublisher
from shared.health import HealthServer, health_server
from shared.kafka_listener import KafkaListener
from shared.kafka_security import client_options
from shared.logging import configure_logging
from shared.senders import MessageSigner, gateway_signer
from shared.settings import CommonSettings
from shared.store.agent_versions import AgentVersionCheck
from shared.store.api_keys import Role, create_key
from shared.store.factory import mongo_store
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
    thread_ttl_minutes: float | None = Field(default=None, gt=0, le=MAX_TTL_MINUTES)
    """The time to live of a thread (or session) created without a ``ttl`` of its own, in
    minutes from its creation and from each new turn (LangGraph's ``default_ttl``); past it the
    orchestrators delete it. None: threads are kept until deleted."""
    max_json_string: int = Field(default=100_000, ge=1)
    rate_limit_per_second: float = Field(default=20.0, gt=0)
    """Per valid API key (per client address without one or with a bad one), per gateway
    process."""
    rate_limit_burst: int = Field(default=40, ge=1)
    action_link_secret: SecretStr | None = None
    """Accepts the approve / reject links notifications carry (the notifier's same setting)."""
    stream_key_check_seconds: float = Field(default=5.0, gt=0, le=60)
    """How often an open execution stream re-reads its API key: a revoked key's streams close
    within this. One read per key per interval per process, however many streams."""
    stream_max_per_key: int = Field(default=20, ge=1, le=10_000)
    """Execution streams one API key may hold open on one gateway process (429 beyond)."""
    stream_max_seconds: float = Field(default=900.0, gt=0, le=86_400)
    """An execution stream closes after this long; the client reconnects with Last-Event-ID
    (browsers do on their own) and continues where it stopped."""
    cors_origins: str | None = None
    """Comma-separated origins (``https://chat.example.com``) whose pages may call the API from
    a browser (CORS, preflights included), or ``*`` for any page. Unset: in development, pages
    served from localhost, 127.0.0.1 or [::1] on any port; elsewhere none. Keys travel in
    headers only, never cookies, so an allowed page can do only what its user's key allows
    (services/gateway/cors.py)."""
    trusted_proxies: str = ""
    """Comma-separated IPs or CIDRs of the reverse proxies in front of the gateway: only from
    them is ``X-Forwarded-For`` believed, for the client address the rate limit charges. Empty:
    the socket's peer is the client (the header is ignored)."""
    agent_versions_cache_seconds: float = Field(default=5.0, ge=0, le=3600)
    """How long a read of an agent's current version is reused to let decisions through (a
    409 for changed agent code always reads again; shared/store/agent_versions.py). 0 reads
    every time."""
    dev_api_key: str | None = None
    """Development only: an owner key of project ``demo`` created at start-up (``make dev``).
    Refused in any other environment."""
    decision_signing_key: SecretStr | None = None
    """``<key id>:<base64 of a 32-byte Ed25519 private key>``: signs every decision the gateway
    publishes, so the orchestrator applies only decisions that passed the gateway's checks
    (shared/senders.py). Only gateways hold it; the orchestrators hold its public half. Required
    in production; elsewhere a well-known development key (``interlock keys decision-key``)."""

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, value: str) -> str:
        entries = [entry.strip() for entry in value.split(",") if entry.strip()]
        for entry in entries:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"INTERLOCK_TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR"
                ) from None
        return ",".join(entries)

    @field_validator("cors_origins")
    @classmethod
    def _origins_are_origins(cls, value: str | None) -> str | None:
        return None if value is None else ",".join(parse_origins(value))

    @property
    def cors_origin_list(self) -> list[str]:
        return parse_origins(self.cors_origins or "")

    @property
    def trusted_proxy_list(self) -> list[str]:
        return self.trusted_proxies.split(",") if self.trusted_proxies else []

    @model_validator(mode="after")
    def _dev_key_only_in_development(self) -> GatewaySettings:
        if self.dev_api_key is not None and self.environment != "development":
            raise ValueError(
                "INTERLOCK_DEV_API_KEY is a development bootstrap; it is refused in"
                f" {self.environment!r}: create keys with `interlock keys create`"
            )
        self.decision_signer  # noqa: B018 -- a missing or malformed key fails at start-up
        return self

    @functools.cached_property
    def decision_signer(self) -> MessageSigner:
        key = self.decision_signing_key
        return gateway_signer(
            None if key is None else key.get_secret_value(), environment=self.environment
        )


def create_app(
    settings: GatewaySettings | None = None,
    *,
    store: Store | None = None,
    publisher: EventPublisher | None = None,
    listeners: ListenerHost | None = None,
    metrics_of: Sequence[str] = (SERVICE,),
) -> FastAPI:
    """With neither ``publisher`` nor ``listeners`` the gateway makes its own Kafka clients; a
    caller that passes a publisher (``interlock dev``, tests) passes the bus its streams listen
    on too. ``metrics_of``: the services this process runs, whose metrics the health listener
    serves (``interlock dev``: all four)."""
    settings = settings or GatewaySettings()
    configure_logging(SERVICE, level=settings.log_level, fmt=settings.log_format)
    configure_tracing(SERVICE)
    registry = load_registry(settings.agents_file)
    # Every gateway process hears all of execution.activity and feeds its open streams.
    feed = ExecutionFeed()
    clients = GatewayClients.of(
        settings, feed, store=store, publisher=publisher, listeners=listeners
    )
    # The gateway's view of the keys: the development key is refused outside development.
    keys = GatewayKeys(clients.store.api_keys, environment=settings.environment)
    # /metrics (every tenant's counts) only here, never on the public port.
    health = health_server(
        settings, {"database": clients.store.ping}, metrics=metrics.registry_of(*metrics_of)
    )
    app = FastAPI(
        title="Interlock",
        version="0.1.0",
        summary="Durable human-in-the-loop execution for LangGraph agents.",
        lifespan=clients.lifespan(settings, health),
        # FastAPI's pages load Swagger UI and ReDoc from a CDN; install_api_docs serves /docs.
        docs_url=None,
        redoc_url=None,
    )
    install_problem_handlers(app)
    install_limits(
        app,
        max_body_bytes=settings.max_body_bytes,
        max_json_depth=settings.max_json_depth,
        max_json_string=settings.max_json_string,
        rate_limit_per_second=settings.rate_limit_per_second,
        rate_limit_burst=settings.rate_limit_burst,
        identify=request_key_id(keys),
        trusted_proxies=settings.trusted_proxy_list,
    )
    # Each added later runs earlier. Before the limits: LangGraph's bodies read as JSON
    # whatever type a proxy declared, so the JSON limits scan them too.
    app.add_middleware(JsonWhateverTypeMiddleware)
    # Before the limits too: a preflight is answered at once, and the problems the limits
    # answer (429, 413) carry the CORS headers a page needs to read them.
    app.add_middleware(
        cors_middleware,
        origins=settings.cors_origin_list,
        local_by_default=settings.environment == "development",
    )
    # First of all: every request is counted, preflights and those the limits turn away too.
    app.add_middleware(HttpMetricsMiddleware)
    install_routes(app, settings, clients, registry, keys, feed)
    # A server span per request (continuing a caller's traceparent); probes and scrapes are
    # left out, and so are the per-message ASGI spans that would drown a stream's trace.
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"]
    )
    return app


@dataclass(frozen=True)
class GatewayClients:
    """What the gateway talks to: made with the app, connected in its lifespan, never at import
    time. Whoever creates the store closes it: a store passed in outlives the app."""

    store: Store
    owns_store: bool
    publisher: EventPublisher
    broker: KafkaBroker | None
    """The gateway's own Kafka producer (None when given a publisher)."""
    listener: KafkaListener | None
    """Its own execution.activity listener (None when given the bus to listen on)."""

    @classmethod
    def of(
        cls,
        settings: GatewaySettings,
        feed: ExecutionFeed,
        *,
        store: Store | None,
        publisher: EventPublisher | None,
        listeners: ListenerHost | None,
    ) -> GatewayClients:
        broker = create_broker(settings, SERVICE) if publisher is None else None
        if listeners is None and isinstance(publisher, ListenerHost):
            listeners = publisher  # a bus that is both (the in-process bus, the tests' direct bus)
        if publisher is not None and listeners is None:
            raise ValueError("a gateway given a publisher needs the bus its streams listen on")
        listener = None
        if listeners is None:
            # On demand: a gateway process with no stream open fetches nothing of the topic.
            listener = KafkaListener(
                settings.topics.activity,
                feed.heard,
                client=client_options(settings),
                client_id=SERVICE,
                on_demand=True,
            )
            feed.demand = listener
        else:
            listeners.add_listener(settings.topics.activity, feed.heard)
        return cls(
            store=store or mongo_store(settings),
            owns_store=store is None,
            publisher=publisher or KafkaPublisher(broker),  # type: ignore[arg-type]
            broker=broker,
            listener=listener,
        )

    def lifespan(
        self, settings: GatewaySettings, health: HealthServer | None
    ) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
        @asynccontextmanager
        async def lifespan(_: FastAPI) -> AsyncIterator[None]:
            await self._start(settings, health)
            try:
                yield
            finally:
                await self._stop(health)

        return lifespan

    async def _start(self, settings: GatewaySettings, health: HealthServer | None) -> None:
        if settings.store_init_at_start:
            await self.store.ensure_indexes()
        if settings.dev_api_key is not None:
            await create_key(
                self.store.api_keys,
                project_id=DEV_PROJECT,
                role=Role.OWNER,
                name="development",
                secret=settings.dev_api_key,
            )
        await warn_if_development_key_present(self.store.api_keys, environment=settings.environment)
        if self.broker is not None:
            await self.broker.start()
        if self.listener is not None:
            # Connected and assigned before the first request; it fetches once a stream opens.
            await self.listener.start()
        if health is not None:
            await health.start()

    async def _stop(self, health: HealthServer | None) -> None:
        if health is not None:
            await health.stop()
        if self.listener is not None:
            await self.listener.stop()
        if self.broker is not None:
            await self.broker.stop()
        if self.owns_store:
            await self.store.close()


def install_routes(
    app: FastAPI,
    settings: GatewaySettings,
    clients: GatewayClients,
    registry: AgentRegistry,
    keys: GatewayKeys,
    feed: ExecutionFeed,
) -> None:
    """The API, its streams and notifications, the review page and its docs, decision links
    and the probes."""
    store = clients.store
    # Callers' custom headers are sealed before anything reaches the bus (shared/custom_headers).
    sealing = SealingPublisher(clients.publisher, settings.keyring)
    intake = Intake(
        store=store,
        publisher=sealing,
        topics=settings.topics,
        registry=registry,
        signer=settings.decision_signer,
        agent_versions=AgentVersionCheck(
            store.agent_versions, ttl_seconds=settings.agent_versions_cache_seconds
        ),
    )
    cursors = PageCursors(settings.keyring)
    # Sessions of the native API and LangGraph threads are one thing: one reader of their turns.
    conversations = Conversations(intake, store, default_ttl_minutes=settings.thread_ttl_minutes)
    app.include_router(build_router(intake, registry, keys, cursors, conversations, store))
    # One cap per key, one key re-check and one lifetime for every request held open: the
    # execution streams and the LangGraph API's waits, joins and streams alike.
    bounds = StreamBounds(
        keys,
        StreamLimits(
            key_check_seconds=settings.stream_key_check_seconds,
            max_per_key=settings.stream_max_per_key,
            max_seconds=settings.stream_max_seconds,
        ),
    )
    install_stream(app, intake, keys, feed, bounds)
    app.include_router(build_notifications_router(store.notifications, keys, cursors))
    # langgraph-sdk's client speaks to this one (services/gateway/langgraph/).
    langgraph = LangGraphService(
        intake,
        store,
        feed,
        bounds,
        conversations,
        webhooks_private=settings.webhook_allow_private_networks,
    )
    app.include_router(build_langgraph_router(langgraph, keys))
    app.include_router(build_assistants_router(registry, store.agent_versions, keys))
    app.include_router(build_store_router(store.memories, keys))
    app.include_router(build_cron_router(langgraph, keys))
    app.include_router(crons_router(langgraph, keys))
    # /info and /ok, which LangGraph's UIs call first, with or without a key.
    app.include_router(build_meta_router(store))
    # In development the review page offers the development key's project (never the key).
    dev_sign_in = SignInDefaults(DEV_PROJECT) if settings.environment == "development" else None
    install_review_page(app, sign_in=dev_sign_in)
    install_api_docs(app)
    secret = settings.action_link_secret
    install_action_links(
        app, intake, store.spent_links, secret.get_secret_value() if secret else None
    )

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> dict[str, str]:
        await store.ping()
        return {"status": "ready"}
