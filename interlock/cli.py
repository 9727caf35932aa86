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
from interlock.client.invoke import invoke

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Interlock: durable human review for AI agents.",
)
topics_app = typer.Typer(no_args_is_help=True, help="Kafka topics.")
app.add_typer(topics_app, name="topics")
keys_app = typer.Typer(no_args_is_help=True, help="API keys (written to the database directly).")
app.add_typer(keys_app, name="keys")
# The reviewer CLI: talks to a gateway over HTTP (see docs/cli.md).
app.add_typer(executions_app, name="executions")
app.command("reviews")(reviews)
app.command("invoke")(invoke)


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
) -> None:
    """Run all four services in this one process with the example agents: SQLite and an
    in-process bus (nothing else to install), or the given Kafka and MongoDB."""
    from pydantic import ValidationError

    from interlock.dev import DEV_API_KEY, DevSettings, serve

    if (kafka is None) != (mongodb is None):
        raise typer.BadParameter("give both --kafka and --mongodb, or neither")
    given = {"host": host, "port": port, "data_dir": data}
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


store_app = typer.Typer(no_args_is_help=True, help="The MongoDB store.")
app.add_typer(store_app, name="store")


@store_app.command("init")
def init_store() -> None:
    """Create the collections' indexes (idempotent; a Kubernetes init step runs it) and exit."""
    from shared.settings import CommonSettings
    from shared.store.mongo import MongoStore

    settings = CommonSettings()

    async def init() -> None:
        store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_database)
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


async def _with_keys(action: Any) -> Any:
    from shared.settings import CommonSettings
    from shared.store.mongo import MongoStore

    settings = CommonSettings()
    store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_database)
    try:
        await store.ensure_indexes()
        return await action(store.api_keys)
    finally:
        await store.close()


@keys_app.command("create")
def create_api_key(
    project: str = typer.Option(..., help="The project the key may act in."),
    role: str = typer.Option(
        "PROJECT_MEMBER", help="PROJECT_OWNER, PROJECT_MEMBER or PROJECT_READ_ONLY."
    ),
    name: str = typer.Option("cli", help="A label shown in the audit trail."),
    workspace: list[str] = typer.Option(None, help="Limit the key to these workspaces (repeat)."),
    email: str = typer.Option(
        None,
        help="The person the key is for: separation of duties counts people, so their keys and"
        " the notification links sent to this address count as one reviewer.",
    ),
) -> None:
    """Create a key and print its secret: it is shown this once and stored only as a hash."""
    from pydantic import ValidationError

    from shared.store.api_keys import Role, create_key

    try:
        chosen = Role(role)
    except ValueError:
        typer.echo(
            f"error: unknown role {role!r}; use {', '.join(r.value for r in Role)}", err=True
        )
        raise typer.Exit(2) from None
    try:
        key, secret = asyncio.run(
            _with_keys(
                lambda keys: create_key(
                    keys,
                    project_id=project,
                    role=chosen,
                    name=name,
                    workspaces=workspace or None,
                    email=email,
                )
            )
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        typer.echo(f"error: {first['loc'][0]}: {first['msg']}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"key id:  {key.key_id}\nrole:    {key.role.value}\nproject: {key.project_id}")
    if key.email:
        typer.echo(f"person:  {key.email}")
    typer.echo(f"secret:  {secret}\n(shown once; store it now)")


@keys_app.command("list")
def list_api_keys(project: str = typer.Option(..., help="The project whose keys to list.")) -> None:
    """List a project's keys (never their secrets)."""
    keys = asyncio.run(_with_keys(lambda store: store.list(project)))
    for key in keys:
        state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "active"
        typer.echo(
            f"{key.key_id}  {key.role.value:<18} {key.name:<20} {state:<18} {key.email or ''}"
        )


@keys_app.command("revoke")
def revoke_api_key(
    key_id: str, project: str = typer.Option(..., help="The project the key belongs to.")
) -> None:
    """Revoke a key: it never authenticates again."""
    if not asyncio.run(_with_keys(lambda keys: keys.revoke(project, key_id))):
        typer.echo(f"error: no key {key_id} in project {project}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id}")


@keys_app.command("encryption-key")
def new_encryption_key(
    key_id: str = typer.Option(
        None, help="The key's id (1-32 of A-Z a-z 0-9 _ -); default: random."
    ),
) -> None:
    """Print a fresh entry for INTERLOCK_ENCRYPTION_KEYS.

    The gateway and the sandbox share the keys (deploy/README.md says how to rotate them). Only
    the entry goes to stdout."""
    from shared.crypto import Keyring, KeyringError, new_key_entry

    entry = new_key_entry(key_id)
    try:
        Keyring.parse(entry)
    except KeyringError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(entry)
    typer.echo(
        "Put it first in INTERLOCK_ENCRYPTION_KEYS (comma-separated, newest first) on the gateway"
        " and the sandbox; remove an old key once nothing sealed with it is in flight.",
        err=True,
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
