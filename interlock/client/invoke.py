"""``interlock invoke``: run an agent, either once (scripts) or as a chat session (reviewers).

Once: start the execution, wait until it is suspended or finished, print it, and exit with a
code a script can branch on. Chat (no message, stdin a terminal, no --json/--file): prompt for
messages, each the next turn of one session (so the agent sees the earlier ones), and review
each suspension inline as the Atlas CLI does. ``--session`` continues a session, in either mode.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer

from interlock.client import render
from interlock.client.api import ApiError, Gateway, Json, moved_on, settled
from interlock.client.commands import accepted_line
from interlock.client.review import ask_review
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
from interlock.client.visible import visible

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_SUSPENDED = 3
EXIT_TIMEOUT = 4
"""Still pending or running when ``--timeout`` ran out."""
EXIT_CODES = {
    "completed": EXIT_COMPLETED,
    "error": EXIT_ERROR,
    "cancelled": EXIT_ERROR,
    "expired": EXIT_ERROR,
    "suspended": EXIT_SUSPENDED,
}

QUIT_WORDS = frozenset({"exit", "quit"})
"""Typed alone at ``You>``, they end the chat instead of starting an execution."""

Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="Print only the execution's id (the exit code still says its state)."
    ),
]

Timeout = Annotated[
    float, typer.Option("--timeout", min=0, help="Seconds to wait for a suspension or a result.")
]

Session = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="<id>",
        help="Send the message as the next turn of this session (the id a chat prints): the"
        " agent sees its earlier turns. A new id starts one. A chat without it starts a new one.",
    ),
]


def stdin_is_tty() -> bool:
    """Whether a person is typing (tests replace this to drive the chat session)."""
    return sys.stdin.isatty()


def invoke(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The agent to run, e.g. refund-approval.")],
    message: Annotated[
        str | None, typer.Argument(help="The message (else --file, piped stdin, or a chat).")
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the message from this file.")
    ] = None,
    timeout: Timeout = 120.0,
    session: Session = None,
    as_json: AsJson = False,
    quiet: Quiet = False,
    url: Url = None,
    key: Key = None,
    project: Project = None,
    workspace: Workspace = None,
    verbose: Verbose = False,
) -> None:
    """Run an agent once, or chat with it (one session: each message a turn that sees the earlier
    ones) and review its suspensions inline.

    Exit codes: 0 completed, 3 suspended for review, 1 error or cancelled, 2 usage or HTTP error,
    4 still running at --timeout (docs/cli.md)."""
    interactive = stdin_is_tty()
    if as_json and quiet:
        raise fail("error: give --json or --quiet, not both")
    if message is None and file is None and not (as_json or quiet) and interactive:
        with connect(
            ctx, url, key, project, workspace, as_json=as_json, verbose=verbose
        ) as gateway:
            chat(gateway, agent, timeout, session)
        return
    text = _message(message, file, interactive)
    with connect(ctx, url, key, project, workspace, as_json=as_json, verbose=verbose) as gateway:
        with spinner(f"Running {agent}") as on_progress:
            accepted = gateway.invoke(agent, text, session_id=session)
            execution = gateway.wait(
                accepted["execution_id"], settled, timeout=timeout, on_progress=on_progress
            )
        if as_json:
            render.print_json(out(), execution)
        elif quiet:  # for `ID=$(interlock invoke ... --quiet)`
            typer.echo(execution["execution_id"])
        else:
            out().print(render.execution_panel(execution))
            if execution["status"] == "suspended":
                typer.echo(waiting_for_review(execution["execution_id"]))
    raise typer.Exit(EXIT_CODES.get(execution["status"], EXIT_TIMEOUT))


def _message(message: str | None, file: Path | None, interactive: bool) -> str:
    if message is not None and file is not None:
        raise fail("error: give the message as an argument or with --file, not both")
    if file is not None:
        try:
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except OSError as exc:
            raise fail(f"error: cannot read {file}: {exc.strerror}") from None
    elif message is not None:
        text = message
    elif interactive:
        raise fail("error: give a message (argument, --file, or piped stdin) with --json")
    else:
        text = sys.stdin.read()
    if not text.strip():
        raise fail("error: the message is empty")
    return text.rstrip("\n")


def chat(gateway: Gateway, agent: str, timeout: float, session_id: str | None = None) -> None:
    """Prompt for messages until EOF. The chat is one session (``session_id``, else a new one):
    each message starts its next turn, an execution of its own in which the agent sees the
    earlier turns, so a follow-up after a review is answered knowing what came before."""
    if session_id is None:
        session_id, session = str(uuid.uuid4()), None
    else:
        session = gateway.session(session_id)
    typer.echo(greeting(agent, session_id, session))
    turns = (session or {}).get("turns") or []  # newest first
    if turns and turns[0]["status"] == "suspended":  # its messages are refused until answered
        typer.echo(waiting_for_review(turns[0]["execution_id"]))
    while True:
        try:
            text: str = typer.prompt("You", prompt_suffix="> ")
        except typer.Abort:
            typer.echo("")
            return
        if not text.strip():
            continue
        if text.strip().lower() in QUIT_WORDS:
            return
        try:
            with spinner(f"Running {agent}") as on_progress:
                started = gateway.invoke(agent, text, session_id=session_id)
                execution = gateway.wait(
                    started["execution_id"], settled, timeout=timeout, on_progress=on_progress
                )
            follow(gateway, execution, timeout)
        except ApiError as exc:
            # A refused message or decision ends that turn, not the session.
            typer.echo(visible(exc.sentence()), err=True)
            busy = exc.problem.get("execution_id")
            if str(exc.problem.get("type", "")).endswith("/session-busy") and busy:
                typer.echo(
                    f"Follow the busy turn with `interlock executions get {render.plain(busy)}`",
                    err=True,
                )


def greeting(agent: str, session_id: str, session: Json | None) -> str:
    """The chat's first line: the session its messages go to, said once, so that it can be
    continued later with ``--session`` (``session``: the gateway's, None for a new one)."""
    turns = (session or {}).get("turns") or []
    if session is None:
        where = f"new session {render.plain(session_id)} (continue it later with --session)"
    elif not turns:
        where = f"session {render.plain(session_id)} (no turns yet)"
    else:
        count = int(turns[0]["turn"])
        where = f"session {render.plain(session_id)} ({count} turn{'s' * (count != 1)} so far)"
    return f"Chatting with {render.plain(agent)} in {where}. Ctrl-D or 'exit' to quit."


def waiting_for_review(execution_id: str) -> str:
    return (
        f"Waiting for review: interlock executions resume {render.plain(execution_id)}"
        " --decision ..."
    )


def follow(gateway: Gateway, execution: Json, timeout: float) -> None:
    """Review every suspension of the execution inline until it finishes."""
    execution_id = execution["execution_id"]
    while execution["status"] == "suspended":
        try:
            body = ask_review(execution)
        except typer.Abort:
            typer.echo(f"\nReview abandoned: execution {execution_id} stays suspended.")
            raise typer.Exit(EXIT_SUSPENDED) from None
        accepted = gateway.resume(execution_id, body)
        if accepted.get("status") == "awaiting_approvals":
            typer.echo(accepted_line(accepted))
            return
        typer.echo("Execution resumed")
        answered = execution
        with spinner("Waiting for the agent") as on_progress:
            execution = gateway.wait(
                execution_id, moved_on(answered), timeout=timeout, on_progress=on_progress
            )
        if not moved_on(answered)(execution):
            break
    status = execution["status"]
    if status == "completed":
        typer.echo(render.agent_output(execution) or "Execution completed")
    elif status == "error":
        typer.echo(f"Execution failed: {render.failure(execution.get('error'))}")
    elif status == "cancelled":
        typer.echo("Execution cancelled")
    elif status == "expired":
        typer.echo("Execution expired: nobody reviewed it before its deadline")
    else:
        typer.echo(
            f"Still {status} after {timeout:g}s: follow it with"
            f" `interlock executions get {execution_id}`"
        )
