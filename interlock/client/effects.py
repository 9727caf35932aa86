"""``interlock effects``: what the effects sink of ``interlock dev`` received.

The sink is the fake mail and payments API dev mode hosts (interlock/effects_sink.py); listing it
is how a user sees that an agent's email went out once, even across a restart.
"""

from __future__ import annotations

import json

import typer
from rich.table import Table

from interlock.client import render
from interlock.client.api import Json
from interlock.client.render import cell
from interlock.client.session import (
    AsJson,
    Key,
    Project,
    Url,
    Verbose,
    Workspace,
    connect,
    out,
)
from interlock.client.visible import visible


def effects(
    ctx: typer.Context,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """What the dev effects sink received: each email or payment, and whether it took effect."""
    with connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway:
        received = gateway.effects()
    if as_json:
        render.print_json(out(), received)
        return
    out().print(effects_table(received))


def effects_table(received: Json) -> Table:
    calls = received["calls"]
    table = Table(
        title=f"Effects sink: {len(calls)} received, {received['applied']} took effect",
        title_justify="left",
    )
    table.add_column("kind")
    table.add_column("what")
    table.add_column("outcome")
    table.add_column("idempotency key", overflow="fold")
    for call in calls:
        outcome = "applied" if call["applied"] else "repeat: not applied again"
        table.add_row(cell(call["kind"]), cell(_what(call["body"])), outcome, cell(call["key"]))
    return table


def _what(body: object) -> str:
    """An email's subject (and recipient), else the body as compact JSON."""
    if isinstance(body, dict) and "subject" in body:
        to = f" to {body['to']}" if "to" in body else ""
        return visible(f"{body['subject']}{to}")
    return visible(json.dumps(body, separators=(", ", ": ")))
