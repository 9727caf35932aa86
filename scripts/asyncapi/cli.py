"""``python -m scripts.asyncapi [PATH] [--check]``: write the document, or check it is current."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from scripts.asyncapi.spec import Format, render

__all__ = ["DEFAULT_PATH", "main"]

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml"
COMMAND = "python -m scripts.asyncapi"
DIFF_LINES_SHOWN = 60


def format_for(path: Path) -> Format:
    return "json" if path.suffix == ".json" else "yaml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Write the AsyncAPI document of Interlock's topics, or check it is current.",
    )
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=DEFAULT_PATH,
        help="where the document goes (.json for JSON, else YAML; default: docs/asyncapi.yaml)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the file differs from what the code generates",
    )
    return parser


def _check(path: Path, expected: str) -> int:
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current == expected:
        print(f"{path} is up to date")
        return 0
    problem = "does not exist" if current is None else "is out of date with shared/events.py"
    diff = list(
        difflib.unified_diff(
            (current or "").splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile=f"{path} (generated)",
        )
    )
    shown = "".join(diff[:DIFF_LINES_SHOWN]) + (
        f"... ({len(diff) - DIFF_LINES_SHOWN} more diff lines)\n"
        if len(diff) > DIFF_LINES_SHOWN
        else ""
    )
    command = COMMAND if path.resolve() == DEFAULT_PATH else f"{COMMAND} {path}"
    print(f"{path} {problem}; regenerate it with: {command}\n{shown}", file=sys.stderr, end="")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path: Path = args.path
    expected = render(format_for(path))
    if args.check:
        return _check(path, expected)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(expected, encoding="utf-8", newline="\n")
    print(f"wrote {path}")
    return 0
