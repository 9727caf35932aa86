"""``interlock executions ...`` and ``interlock reviews``: read executions, decide on them."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from interlock.client import render
from interlock.client.api import Gateway, Json, past_suspension
from interlock.client.session import (
    AsJson,
    Key,
    Project,
    Url,
    Verbose,
    Workspace,
    connect,
    fail,
    out,
    spinner,
)

executions_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,  # see interlock/cli.py
    help="Read and decide on executions.",
)

Limit = Annotated[int, typer.Option("--limit", min=1, max=200, help="Page size.")]
All = Annotated[bool, typer.Option("--all", help="Follow next_cursor to the last page.")]


def _collect(gateway: Gateway, status: str | None, limit: int, everything: bool) -> Json:
    """One page, or with ``--all`` every page merged into one body of the same shape."""
    if not everything:
        return gateway.page(status=status, limit=limit)
    items: list[Json] = []
    for page in gateway.pages(status=status, limit=limit):
        items.extend(page["items"])
    return {"items": items, "next_cursor": None}


@executions_app.command("list")
def list_executions(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option("--status", help="Only this status, e.g. suspended.")
    ] = None,
    limit: Limit = 50,
    everything: All = False,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """List executions, oldest first."""
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Listing executions"),
    ):
        page = _collect(gateway, status, limit, everything)
    if as_json:
        render.print_json(out(), page)
        return
    console = out()
    console.print(render.executions_table(page["items"]))
    if page.get("next_cursor"):
        console.print("More executions: use --all (or a larger --limit).")


@executions_app.command("get")
def get_execution(
    ctx: typer.Context,
    execution_id: str,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Show one execution: status, pending review, output or error, decisions."""
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Reading the execution"),
    ):
        execution = gateway.get(execution_id)
    if as_json:
        render.print_json(out(), execution)
    else:
        out().print(render.execution_panel(execution))


@executions_app.command("audit")
def audit_execution(
    ctx: typer.Context,
    execution_id: str,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Show an execution's audit trail: every transition and decision, who and why."""
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Reading the audit trail"),
    ):
        trail = gateway.audit(execution_id)
    if as_json:
        render.print_json(out(), trail)
        return
    console = out()
    for table in render.audit_tables(trail):
        console.print(table)


@executions_app.command("cancel")
def cancel_execution(
    ctx: typer.Context,
    execution_id: str,
    reason: str | None = typer.Option(None, help="Why; recorded in the audit trail."),
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Cancel an execution that has not ended (needs PROJECT_OWNER)."""
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Cancelling"),
    ):
        answer = gateway.cancel(execution_id, reason)
    if as_json:
        render.print_json(out(), answer)
        return
    out().print(render.cell(f"Cancellation of {render.plain(execution_id)} accepted"))


@executions_app.command("resume")
def resume_execution(
    ctx: typer.Context,
    execution_id: str,
    decision: Annotated[
        str | None, typer.Option("--decision", help="The decision, e.g. approve.")
    ] = None,
    notes: Annotated[str | None, typer.Option("--notes", help="Reviewer notes.")] = None,
    decisions_json: Annotated[
        str | None,
        typer.Option(
            "--decisions-json",
            help='LangChain action decisions, e.g. \'[{"type": "approve"}]\', one per action.',
        ),
    ] = None,
    interrupt_id: Annotated[
        str | None, typer.Option("--interrupt-id", help="The interrupt answered.")
    ] = None,
    generation: Annotated[
        int | None, typer.Option("--generation", min=1, help="The suspension answered.")
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="Return once the agent has acted on the decision (ended, or at its next review).",
        ),
    ] = True,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for that (with --wait).")
    ] = 120.0,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Submit a decision for a suspended execution, and wait until the agent has acted on it
    (ended, or stopped at its next review): an ``executions get`` after it sees the outcome."""
    body = resume_body(decision, decisions_json)
    optional = {"reviewer_notes": notes, "interrupt_id": interrupt_id, "generation": generation}
    body.update({k: v for k, v in optional.items() if v is not None})
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Submitting the decision"),
    ):
        accepted = gateway.resume(execution_id, body)
        if wait and accepted.get("status") != "awaiting_approvals":
            # What --wait promises is the agent's answer, not its content: a timeout here is
            # no error (the decision is accepted; `executions get` shows where it is).
            gateway.wait(
                execution_id, past_suspension(int(accepted["generation"])), timeout=timeout
            )
    if as_json:
        render.print_json(out(), accepted)
    else:
        out().print(accepted_line(accepted))


def resume_body(decision: str | None, decisions_json: str | None) -> Json:
    if (decision is None) == (decisions_json is None):
        raise fail("error: give exactly one of --decision or --decisions-json")
    if decision is not None:
        return {"decision": decision}
    assert decisions_json is not None
    try:
        decisions: Any = json.loads(decisions_json)
    except json.JSONDecodeError as exc:
        raise fail(f"error: --decisions-json is not JSON: {exc.msg}") from None
    if not isinstance(decisions, list):
        raise fail("error: --decisions-json must be a JSON list, one decision per action")
    return {"decisions": decisions}


def accepted_line(accepted: Json) -> str:
    if accepted.get("status") == "awaiting_approvals":
        count = len(accepted.get("approvals") or [])
        return (
            f"Approval recorded ({count} of {accepted.get('approvals_required')}): the execution"
            " stays suspended until enough owners give the same answer"
        )
    return f"Execution resumed (decision {render.plain(accepted['decision'])})"


def reviews(
    ctx: typer.Context,
    limit: Limit = 50,
    everything: All = False,
    as_json: AsJson = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Pending reviews: suspended executions with what each asks."""
    with (
        connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway,
        spinner("Listing pending reviews"),
    ):
        page = _collect(gateway, "suspended", limit, everything)
    if as_json:
        render.print_json(out(), page)
        return
    console = out()
    if not page["items"]:
        console.print("No pending reviews.")
        return
    for panel in render.reviews_panels(page["items"]):
        console.print(panel)
    if page.get("next_cursor"):
        console.print("More pending reviews: use --all (or a larger --limit).")
