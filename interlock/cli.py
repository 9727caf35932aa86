"""``interlock``: the command line entry point.

interlock service gateway|orchestrator|sandbox|notifier
interlock topics create
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path

import typer

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Interlock: durable human review for AI agents.",
)
topics_app = typer.Typer(no_args_is_help=True, help="Kafka topics.")
app.add_typer(topics_app, name="topics")


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
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None)
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
