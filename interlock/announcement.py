"""What ``interlock dev`` and ``interlock up`` print once the gateway answers: where everything
is and the key to use, printed after the start-up logs so it is the last thing on the screen."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

READY_LINE = "Interlock is running"
"""The first words of the announcement (tests and ``make up`` wait for them)."""

PROJECT, WORKSPACE = "demo", "default"


def cli_command() -> str:
    """How to call ``interlock`` from here: the virtualenv's script when it is not on PATH."""
    script = Path(sys.executable).with_name("interlock")
    if not script.exists() or shutil.which("interlock") == str(script):
        return "interlock"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def announcement(
    base_url: str,
    key: str | None,
    *,
    effects_sink: bool = False,
    log_hint: str | None = None,
) -> str:
    """``effects_sink``: dev mode hosts the fake mail and payments API (interlock/effects_sink.py).
    ``log_hint``: a line saying how much the terminal logs and how to see more."""
    cli = cli_command()
    lines = [f"{READY_LINE}: {base_url}"]
    if log_hint:
        lines.append(log_hint)
    lines += [
        "",
        f"  API docs       {base_url}/docs",
        f"  Review page    {base_url}/reviews",
    ]
    if effects_sink:
        lines.append(f"  Effects sink   {base_url}/dev/effects  (what the agents emailed and paid)")
    lines += [
        "",
        f"  Try an agent   {cli} invoke refund-approval",
        f"  Pending        {cli} reviews",
        f"  Second key     {cli} keys create --project {PROJECT} --role PROJECT_OWNER"
        " --email you@example.com",
        "",
    ]
    if key:
        lines += [
            f"Development API key (owner of project {PROJECT}, workspace {WORKSPACE}; the CLI run"
            " from this folder uses it on its own):",
            f"  {key}",
        ]
    else:
        lines.append(
            f"No API key yet: {cli} keys create --project {PROJECT} --role PROJECT_OWNER"
            " (then export INTERLOCK_API_KEY=the secret it prints)"
        )
    lines += ["", "Press Ctrl-C to stop.", ""]
    return "\n".join(lines)
