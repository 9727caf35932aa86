"""``python -m scripts.store_roles [--check]``: write the MongoDB roles the sidecar creates
(deploy/k8s/base/mongodb/service-roles.json) from shared/store/access.py, or check the committed
file is current (``make store-roles``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from shared.store.access import roles_document

PATH = (
    Path(__file__).resolve().parents[1]
    / "deploy"
    / "k8s"
    / "base"
    / "mongodb"
    / "service-roles.json"
)
COMMAND = "make store-roles"


LIST_OF_STRINGS = re.compile(r"\[\s+((?:\"[^\"]*\",?\s*)+?)\s*\]")


def render() -> str:
    """Indented JSON, each list of actions on one line (a role reads as a table)."""
    text = json.dumps(roles_document(), indent=2)
    return LIST_OF_STRINGS.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.store_roles", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the file is not current"
    )
    args = parser.parse_args(argv)
    expected = render()
    if args.check:
        current = PATH.read_text(encoding="utf-8") if PATH.exists() else ""
        if current != expected:
            print(f"{PATH} is not what shared/store/access.py declares: run `{COMMAND}`")
            return 1
        return 0
    PATH.write_text(expected, encoding="utf-8")
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
