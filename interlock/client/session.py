"""What every command shares: the connection options, the gateway connection, error handling.

Errors become one line on stderr and exit code 2, never a traceback: reviewers read them, and
scripts branch on the code. With ``--json`` an error answer's problem document goes to stdout
too, so a script reads a JSON body whatever happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.text import Text

from interlock.client.api import HTTP_TIMEOUT_SECONDS, ApiError, Gateway, GatewayUnreachable, Json
from interlock.client.config import Config, ConfigError, load_config
from interlock.client.render import plain, print_json
from interlock.client.visible import visible

EXIT_USAGE = 2

HttpFactory = Callable[[], httpx.Client]
"""Makes the HTTP client. Tests pass one as the root context's ``obj`` (``CliRunner.invoke(...,
obj=...)``) to reach an app in-process; such a client belongs to the caller: not closed here."""

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Gateway URL (else INTERLOCK_URL, profile, http://127.0.0.1:$INTERLOCK_PORT).",
    ),
]
Key = Annotated[
    str | None,
    typer.Option("--key", help="API key (else INTERLOCK_API_KEY, else profile)."),
]
Project = Annotated[
    str | None,
    typer.Option("--project", help="Project (else INTERLOCK_PROJECT, profile, 'demo')."),
]
Workspace = Annotated[
    str | None,
    typer.Option("--workspace", help="Workspace (else INTERLOCK_WORKSPACE, profile, 'default')."),
]
AsJson = Annotated[
    bool,
    typer.Option("--json", help="Print the raw JSON body (an error's problem document included)."),
]
Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Say on stderr which gateway is used, and why that one."),
]


def out() -> Console:
    # Made per call, not at import: Rich then writes to whatever sys.stdout is now (CliRunner
    # swaps it per invocation).
    return Console(highlight=False)


def err() -> Console:
    return Console(stderr=True, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


@contextmanager
def connect(
    ctx: typer.Context,
    url: str | None,
    key: str | None,
    project: str | None,
    workspace: str | None,
    *,
    as_json: bool = False,
    verbose: bool = False,
) -> Iterator[Gateway]:
    """The gateway for these options; gateway, network and configuration errors inside the
    block exit 2 with one line on stderr (and, with ``as_json``, the problem on stdout)."""
    try:
        config = load_config(url=url, key=key, project=project, workspace=workspace)
    except ConfigError as exc:
        raise fail(f"error: {visible(str(exc))}") from None
    if verbose:
        typer.echo(visible(config.describe()), err=True)
    injected = ctx.find_root().obj
    factory: HttpFactory | None = injected if callable(injected) else None
    try:
        if callable(factory):
            yield Gateway(factory(), config)
        else:
            with httpx.Client(timeout=HTTP_TIMEOUT_SECONDS) as http:
                yield Gateway(http, config)
    except ApiError as exc:
        if as_json:
            print_json(out(), exc.problem)
        raise fail(visible(exc.sentence())) from None
    except GatewayUnreachable as exc:
        raise fail(f"error: {visible(str(exc))}{unreachable_hint(config)}") from None


def unreachable_hint(config: Config) -> str:
    """What to do about a gateway that does not answer, given where its URL came from."""
    where = f"; the URL is from {config.url_source}"
    return (
        f"{where}. Start Interlock with `interlock dev` (or `make dev`), or point at a running"
        " one with --url or INTERLOCK_URL"
    )


@contextmanager
def spinner(text: str) -> Iterator[Callable[[str, Json], None]]:
    """A spinner with ``text``; yields a progress callback for ``Gateway.wait`` that shows what
    the agent is doing next to it (the step it finished, the words it is writing)."""
    # On stderr so `--json` output stays clean; Rich draws nothing when stderr is not a TTY.
    with err().status(Text(plain(text))) as status:
        words = ""

        def on_progress(kind: str, data: Json) -> None:
            nonlocal words
            if kind == "update":
                status.update(Text(f"{text}: finished {plain(data.get('node'))}"))
            elif kind == "token":
                words = (words + str(data.get("text", ""))).replace("\n", " ")[-60:]
                # A Text, not markup: the agent's words may hold "[...]" or escapes.
                status.update(Text(f"{text}: {plain(words)}"))

        yield on_progress
