"""A file-backed ledger: where the example agents' side effects land, so tests can count them.

Each line is one JSON record. ``INTERLOCK_AGENT_LEDGER`` names the file (default
``.interlock/ledger.jsonl`` under the working directory).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DEFAULT_LEDGER = Path(".interlock") / "ledger.jsonl"


def ledger_path() -> Path:
    return Path(os.environ.get("INTERLOCK_AGENT_LEDGER", str(DEFAULT_LEDGER)))


def record(entry: dict[str, Any]) -> None:
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_all(path: Path | None = None) -> list[dict[str, Any]]:
    target = path or ledger_path()
    if not target.exists():
        return []
    return [json.loads(line) for line in target.read_text().splitlines() if line.strip()]
