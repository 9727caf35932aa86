"""``interlock``: the command line entry point.

interlock dev (everything in one process, nothing else installed)
interlock up (the four services as separate processes)
interlock service gateway|orchestrator|sandbox|notifier
interlock topics create
interlock executions list|get|audit|resume, interlock reviews, interlock invoke (reviewer CLI)
"""

from __future__ import annotations

import asyncio
import contextlib
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from interlock.client.commands import executions_app, reviews
from interlock.client.effects import effects
from interlock.client.invoke import invoke
from interlock.keys import keys_app

# rich_markup_mode=None on every Typer: Typer's Rich help prints a type after every option,
# flags included (`--json <bool>`, `--help <bool>`), as if they took a value; the plain help
# shows a flag as a flag.
app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="Interlock: durable human review for AI agents.",
)
topics_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Kafka topics.")
app.add_typer(topics_app, name="topics")
app.add_typer(keys_app, name="keys")
# The reviewer CLI: talks to a gateway over HTTP (see docs/cli.md).
app.add_typer(executions_app, name="executions")
app.command("reviews")(reviews)
app.command("invoke")(invoke)
app.command("effects")(effects)


class LogFormat(StrEnum):
    AUTO = "auto"
    CONSOLE = "console"
    JSON = "json"


class ServiceName(StrEnum):
    GATEWAY = "gateway"
    ORCHESTRATOR = "orchestrator"
    SANDBOX = "sandbox"
    NOTIFIER = "notifier"


@app.command()
def service(name: ServiceName) -> None:
    """Run one service in the foreground (settings from INTERLOCK_* environment variables)."""
    if name is ServiceName.GATEWAY:
        import uvicorn

        from services.gateway.app import GatewaySettings, create_app

        settings = GatewaySettings()
        # proxy_headers=False: uvicorn would believe X-Forwarded-For from loopback on its own;
        # the app trusts it only from INTERLOCK_TRUSTED_PROXIES (services/gateway/limits.py).
        uvicorn.run(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_config=None,
            proxy_headers=False,
        )
        return
    if name is ServiceName.ORCHESTRATOR:
        from services.orchestrator.app import create_app as create_orchestrator

        asyncio.run(create_orchestrator().run())
    elif name is ServiceName.SANDBOX:
        from services.sandbox.app import create_app as create_sandbox

        asyncio.run(create_sandbox().run())
    else:
        from services.notifier.app import create_app as create_notifier

        asyncio.run(create_notifier().run())


@app.command()
def up(
    log_dir: Path | None = typer.Option(
        None, help="Write each service's log here instead of the terminal."
    ),
) -> None:
    """Run all four services as separate processes until Ctrl-C (development and `make up`)."""
    from interlock.supervisor import run

    raise typer.Exit(run(log_dir))


@app.command()
def dev(
    port: int | None = typer.Option(
        None, help="Port of the API, docs and review page (else INTERLOCK_PORT, else 8000)."
    ),
    host: str | None = typer.Option(
        None, help="Address to listen on (else INTERLOCK_HOST, else 127.0.0.1)."
    ),
    data: Path | None = typer.Option(
        None,
        help="Folder of the SQLite files, kept across restarts (else INTERLOCK_DATA_DIR,"
        " else .interlock/dev).",
    ),
    kafka: str | None = typer.Option(
        None, help="Bootstrap servers: use this Kafka instead of the in-process bus."
    ),
    mongodb: str | None = typer.Option(
        None, help="Connection URI: use this MongoDB instead of SQLite (needs --kafka)."
    ),
    log_format: LogFormat | None = typer.Option(
        None,
        "--log-format",
        help="Logs as readable lines (console), JSON lines (json), or console in a terminal"
        " and JSON otherwise (auto). Else INTERLOCK_LOG_FORMAT, else console.",
    ),
) -> None:
    """Run all four services in this one process with the example agents: SQLite and an
    in-process bus (nothing else to install), or the given Kafka and MongoDB."""
    from pydantic import ValidationError

    from interlock.dev import DEV_API_KEY, DevSettings, serve

    if (kafka is None) != (mongodb is None):
        raise typer.BadParameter("give both --kafka and --mongodb, or neither")
    given = {
        "host": host,
        "port": port,
        "data_dir": data,
        "log_format": None if log_format is None else log_format.value,
    }
    overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if kafka is not None:
        overrides |= {
            "kafka_bootstrap_servers": kafka,
            "mongodb_uri": mongodb,
            "embedded": False,
        }
    try:
        settings = DevSettings(**overrides)
    except ValidationError as exc:
        typer.echo(f"error: invalid settings: {exc.errors()[0]['msg']}", err=True)
        raise typer.Exit(2) from None
    if settings.environment == "development" and settings.dev_api_key is None:
        settings = settings.model_copy(update={"dev_api_key": DEV_API_KEY})
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings))


store_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The MongoDB store.")
app.add_typer(store_app, name="store")


@store_app.command("init")
def init_store() -> None:
    """Create the collections' indexes (idempotent; a Kubernetes init step runs it) and exit."""
    from shared.settings import CommonSettings
    from shared.store.factory import mongo_store

    settings = CommonSettings()

    async def init() -> None:
        store = mongo_store(settings)
        try:
            await store.ping()
            await store.ensure_indexes()
        finally:
            await store.close()

    asyncio.run(init())
    typer.echo(f"indexes ready in database {settings.mongodb_database}")


@topics_app.command("create")
def create_topics(
    replication_factor: int = typer.Option(1, min=1, help="Replicas per partition."),
) -> None:
    """Create every Interlock topic that does not exist yet (brokers run with auto-create off)."""
    from shared.bus import ensure_topics
    from shared.settings import CommonSettings

    settings = CommonSettings()
    created = asyncio.run(ensure_topics(settings, replication_factor=replication_factor))
    for name in settings.topics.all():
        state = "created" if name in created else "exists"
        typer.echo(f"{name}: {state} ({settings.topic_partitions} partitions)")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
