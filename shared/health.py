"""Health endpoints on a listener of their own (``INTERLOCK_HEALTH_PORT``), for Kubernetes probes
and Prometheus.

``GET /healthz``: the process and its event loop answer (liveness: a wedged loop fails it).
``GET /readyz``: the broker and the database answer within a few seconds (readiness: 503 with
what failed, so a replica cut off from either stops being counted as ready). It also carries
what the service reports about itself without being unready (the sandbox: the agents it cannot
load, while the others serve).
``GET /metrics``: the process's Prometheus metrics (``shared/metrics.py``), for scraping.
``GET /debug/tasks``: every asyncio task of the process and where it waits (``task_stacks``), to
see what a process that answers its probes but not its work is waiting on: a thread dump
(py-spy) of an asyncio process shows only its idle event loop. Off unless
``INTERLOCK_DEBUG_TASKS_TOKEN`` is set (404), and then only for ``Authorization: Bearer
<token>`` (401 otherwise): it shows the code's layout, and the scrapers of ``/metrics`` need not
see it. Task names say what a task does, never whom it serves (no key or execution ids).

Every service serves it, the gateway too: its ``/metrics`` counts every tenant's executions, so
it is kept off the public API port, on this listener that only the cluster network reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import io
from collections.abc import Awaitable, Callable, Iterator, Mapping

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shared.settings import CommonSettings

Check = Callable[[], Awaitable[None]]
Details = Callable[[], Mapping[str, object]]
"""What a service adds to its readiness answer; an empty mapping adds nothing."""
CHECK_TIMEOUT_SECONDS = 3.0


def health_app(
    checks: Mapping[str, Check],
    metrics: CollectorRegistry = REGISTRY,
    *,
    debug_tasks_token: str | None = None,
    details: Details | None = None,
) -> Starlette:
    """``metrics``: what ``/metrics`` serves (``shared.metrics.registry_of`` the process's
    services; everything by default). ``debug_tasks_token``: the bearer token ``/debug/tasks``
    asks for; None: no such route. ``details``: what ``/readyz`` says beside its status."""

    async def alive(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def ready(_: Request) -> JSONResponse:
        failed: dict[str, str] = {}
        for name, check in checks.items():
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                    await check()
            except Exception as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"[:300]
        extra = dict(details()) if details is not None else {}
        if failed:
            return JSONResponse(
                {"status": "unavailable", "failed": failed, **extra}, status_code=503
            )
        return JSONResponse({"status": "ready", **extra})

    async def scrape(_: Request) -> Response:
        return Response(generate_latest(metrics), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/healthz", alive),
        Route("/readyz", ready),
        Route("/metrics", scrape),
    ]
    if debug_tasks_token is not None:
        routes.append(_debug_tasks(debug_tasks_token))
    return Starlette(routes=routes)


def _debug_tasks(token: str) -> Route:
    async def tasks(request: Request) -> PlainTextResponse:
        if not bearer_matches(request.headers.get("authorization"), token):
            return PlainTextResponse(
                "/debug/tasks needs Authorization: Bearer <INTERLOCK_DEBUG_TASKS_TOKEN>\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="debug"'},
            )
        return PlainTextResponse(task_stacks())

    return Route("/debug/tasks", tasks)


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Does the ``Authorization`` value carry ``token`` as its bearer credential? The scheme in
    any case, the token compared in constant time."""
    scheme, _, credential = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credential.strip().encode(), token.encode())


def task_stacks() -> str:
    """Each asyncio task of the running loop: its name, then the chain of coroutines it is
    suspended in, outermost first, down to what it waits on. ``Task.print_stack`` shows only
    the outermost frame of a suspended task, which says nothing: every request task is in
    uvicorn's ``run_asgi``."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(), key=lambda task: task.get_name())
    out.write(f"{len(tasks)} tasks\n")
    for task in tasks:
        out.write(f"\n--- {task.get_name()}\n")
        for line in _await_chain(task.get_coro()):
            out.write(f"  {line}\n")
    return out.getvalue()


def _await_chain(awaitable: object, depth: int = 64) -> list[str]:
    lines = []
    while awaitable is not None and depth > 0:
        depth -= 1
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is None:
            lines.append(f"awaits {type(awaitable).__qualname__}")
            break
        code = frame.f_code
        lines.append(f"{code.co_filename}:{frame.f_lineno} {code.co_qualname}")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "ag_await", None)
    return lines


class HealthServer:
    """The health app on its own port, started and stopped with the service."""

    def __init__(
        self,
        host: str,
        port: int,
        checks: Mapping[str, Check],
        metrics: CollectorRegistry = REGISTRY,
        *,
        debug_tasks_token: str | None = None,
        details: Details | None = None,
    ) -> None:
        app = health_app(checks, metrics, debug_tasks_token=debug_tasks_token, details=details)
        config = uvicorn.Config(app, host=host, port=port, log_config=None)
        self._server = _SignalFreeServer(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._serve())
        while not self._server.started:
            if self._task.done():
                await self._task  # raises why it could not start (port in use...)
                return
            await asyncio.sleep(0.01)

    async def _serve(self) -> None:
        config = self._server.config
        try:
            await self._server.serve()
        except SystemExit as exc:  # uvicorn exits the process when it cannot bind
            raise OSError(
                f"the health server cannot listen on {config.host}:{config.port} (in use?)"
            ) from exc

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class _SignalFreeServer(uvicorn.Server):
    """uvicorn takes over SIGINT and SIGTERM while it serves; here they belong to the service,
    which stops this server on its way down."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def broker_reachable(ping: Callable[[float], Awaitable[bool]]) -> None:
    if not await ping(CHECK_TIMEOUT_SECONDS):
        raise ConnectionError("the Kafka broker did not answer")


Hook = Callable[[], Awaitable[None]]


def health_server(
    settings: CommonSettings,
    checks: Mapping[str, Check],
    *,
    metrics: CollectorRegistry,
    details: Details | None = None,
) -> HealthServer | None:
    """The process's health listener, or None when ``INTERLOCK_HEALTH_PORT`` is not set."""
    if settings.health_port is None:
        return None
    token = settings.debug_tasks_token
    return HealthServer(
        settings.health_host,
        settings.health_port,
        checks,
        metrics,
        debug_tasks_token=None if token is None else token.get_secret_value(),
        details=details,
    )


def health_hooks(
    settings: CommonSettings,
    broker_ping: Callable[[float], Awaitable[bool]],
    database_ping: Check,
    *,
    metrics: CollectorRegistry,
    details: Details | None = None,
) -> tuple[list[Hook], list[Hook]]:
    """Start-up and shut-down hooks of a consumer's health server (none without a port)."""
    server = health_server(
        settings,
        {"kafka": lambda: broker_reachable(broker_ping), "database": database_ping},
        metrics=metrics,
        details=details,
    )
    if server is None:
        return [], []
    return [server.start], [server.stop]
