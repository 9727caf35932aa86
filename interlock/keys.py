"""``interlock keys ...``: API keys, written to the store of the running Interlock directly
(interlock/key_store.py says which one), and encryption keys.

A store that cannot be used is one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer

from interlock import key_store
from interlock.client.config import ConfigError, choose_profile
from interlock.client.session import fail
from interlock.client.visible import visible
from shared.store.api_keys import ApiKeys, Role

EXIT_STORE = 1
EXIT_USAGE = 2

T = TypeVar("T")

keys_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    help="API keys (written to the running Interlock's store directly), encryption keys.",
)

Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Say on stderr which store is used, and why that one."),
]


def _target() -> key_store.Target:
    from pydantic import ValidationError

    from shared.settings import CommonSettings

    try:
        profile = choose_profile(os.environ)
        settings = CommonSettings()
    except ConfigError as exc:
        raise fail(f"error: {exc}", EXIT_USAGE) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise fail(f"error: invalid settings: {where}: {first['msg']}", EXIT_USAGE) from None
    defaults = key_store.MongoDefaults(
        settings.mongodb_uri, settings.mongodb_database, settings.mongodb_timeout_ms
    )
    return key_store.choose(os.environ, profile, defaults)


def _with_keys(action: Callable[[ApiKeys], Awaitable[T]], verbose: bool) -> T:
    """Run ``action`` on the keys of the store the running Interlock uses."""
    target = _target()
    if verbose:
        typer.echo(f"interlock: keys in {visible(target.describe())}", err=True)

    async def run() -> T:
        async with key_store.opened(target) as keys:
            return await action(keys)

    try:
        return asyncio.run(run())
    except key_store.KeyStoreError as exc:
        raise fail(f"error: {visible(str(exc))}", EXIT_STORE) from None


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
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Print only the secret, as `KEY=$(...)` wants it."
    ),
    verbose: Verbose = False,
) -> None:
    """Create a key and print its secret: it is shown this once and stored only as a hash."""
    from pydantic import ValidationError

    from shared.store.api_keys import create_key

    try:
        chosen = Role(role)
    except ValueError:
        allowed = ", ".join(r.value for r in Role)
        raise fail(f"error: unknown role {visible(role)!r}; use {allowed}", EXIT_USAGE) from None
    try:
        key, secret = _with_keys(
            lambda keys: create_key(
                keys,
                project_id=project,
                role=chosen,
                name=name,
                workspaces=workspace or None,
                email=email,
            ),
            verbose,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise fail(f"error: {first['loc'][0]}: {visible(first['msg'])}", EXIT_USAGE) from None
    if quiet:
        typer.echo(secret)
        return
    typer.echo(f"key id:  {key.key_id}\nrole:    {key.role.value}\nproject: {key.project_id}")
    if key.email:
        typer.echo(f"person:  {visible(key.email)}")
    typer.echo(f"secret:  {secret}\n(shown once; store it now)")


@keys_app.command("list")
def list_api_keys(
    project: str = typer.Option(..., help="The project whose keys to list."),
    verbose: Verbose = False,
) -> None:
    """List a project's keys (never their secrets)."""
    keys = _with_keys(lambda store: store.list(project), verbose)
    for key in keys:
        state = f"revoked {key.revoked_at:%Y-%m-%d}" if key.revoked_at else "active"
        line = f"{key.key_id}  {key.role.value:<18} {key.name:<20} {state:<18} {key.email or ''}"
        typer.echo(visible(line.rstrip()))


@keys_app.command("revoke")
def revoke_api_key(
    key_id: str,
    project: str = typer.Option(..., help="The project the key belongs to."),
    verbose: Verbose = False,
) -> None:
    """Revoke a key: it never authenticates again."""
    if not _with_keys(lambda keys: keys.revoke(project, key_id), verbose):
        raise fail(f"error: no key {visible(key_id)} in project {visible(project)}", EXIT_STORE)
    typer.echo(f"revoked {visible(key_id)}")


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
        raise fail(f"error: {exc}", EXIT_USAGE) from None
    typer.echo(entry)
    typer.echo(
        "Put it first in INTERLOCK_ENCRYPTION_KEYS (comma-separated, newest first) on the gateway"
        " and the sandbox; remove an old key once nothing sealed with it is in flight.",
        err=True,
    )


@keys_app.command("decision-key")
def new_decision_key(
    key_id: str = typer.Option(
        "gw1", help="The key's id (1-64 of A-Z a-z 0-9 _ -), named in every signed decision."
    ),
) -> None:
    """Print a fresh key pair that signs the gateway's decisions.

    The first line (a secret) goes to the gateways as INTERLOCK_DECISION_SIGNING_KEY; the second
    to the orchestrators as INTERLOCK_DECISION_VERIFY_KEYS. Only the two settings go to stdout."""
    from shared.senders import SigningKeyError, gateway_public_keys, gateway_signer, new_key_pair

    private, public = new_key_pair()
    try:
        gateway_signer(f"{key_id}:{private}", environment="production")
        gateway_public_keys(f"{key_id}:{public}", environment="production")
    except SigningKeyError as exc:
        raise fail(f"error: {exc}", EXIT_USAGE) from None
    typer.echo(f"INTERLOCK_DECISION_SIGNING_KEY={key_id}:{private}")
    typer.echo(f"INTERLOCK_DECISION_VERIFY_KEYS={key_id}:{public}")
    typer.echo(
        "The signing key is for the gateways only. To rotate, add the new public key to the"
        " orchestrators' INTERLOCK_DECISION_VERIFY_KEYS (comma-separated) first, then switch the"
        " gateways, then drop the old public key once its decisions are consumed.",
        err=True,
    )


@keys_app.command("producer-key")
def new_producer_key(
    name: str = typer.Argument(..., help="The producer's name (1-64 of A-Z a-z 0-9 _ -)."),
    project: list[str] = typer.Option(..., help="A project it may act in (repeat for more)."),
    role: Role = typer.Option(Role.OWNER, help="What it may do, as an API key of this role."),
) -> None:
    """Register an outside producer that publishes decisions on the bus itself.

    Prints its [producers.NAME] table for INTERLOCK_DECISION_PRODUCERS_FILE (stdout) and its
    private key (stderr): hand the key to the producer, which signs every decision with it
    (docs/security.md, "The bus as a channel")."""
    import tempfile
    from pathlib import Path

    from shared.senders import SigningKeyError, load_producers, new_key_pair

    private, public = new_key_pair()
    projects = ", ".join(f'"{p}"' for p in project)
    table = f'[producers.{name}]\npublic_key = "{public}"\nrole = "{role.value}"\n'
    table += f"projects = [{projects}]\n"
    with tempfile.TemporaryDirectory() as folder:
        check = Path(folder) / "producers.toml"
        check.write_text(table)
        try:
            load_producers(check)
        except SigningKeyError as exc:
            raise fail(f"error: {exc}", EXIT_USAGE) from None
    typer.echo(table, nl=False)
    typer.echo(f"private key of {name} (give it to the producer only): {private}", err=True)
