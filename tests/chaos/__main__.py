"""``python -m tests.chaos``: run the chaos scenarios, print the table, write it as JSON.

    python -m tests.chaos                      every scenario (``make chaos``: about 40 minutes)
    python -m tests.chaos --quick              the short subset that ``make test`` runs too
    python -m tests.chaos --only NAME [--only NAME]
    python -m tests.chaos --list

Kafka and MongoDB come from ``INTERLOCK_KAFKA_BOOTSTRAP_SERVERS`` / ``INTERLOCK_MONGODB_URI``
(the shared local ones); the broker and database faults run on private ones
(tests/chaos/private_infra.py). Exit status 1 when any invariant failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.chaos.runner import (
    Row,
    default_workdir,
    run_scenario,
    settings_from_env,
    table,
    write_json,
)
from tests.chaos.scenarios import SCENARIOS, by_name
from tests.e2e.cluster import REPO

PYTEST_ROWS = {
    "state-machine-properties": ["tests/unit/test_state_machine_properties.py"],
    "api-fuzz-schemathesis": ["tests/e2e/test_api_fuzz.py"],
}
"""Suites run as they are (Hypothesis over the state machine, schemathesis over the API): a row
each, ok when they pass."""


def _pytest_row(name: str, paths: list[str]) -> Row:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths],
        cwd=REPO,
        # More examples than the unit tier's 300: the full run can afford to look harder.
        env={**os.environ, "INTERLOCK_HYPOTHESIS_EXAMPLES": "2000"},
        capture_output=True,
        text=True,
    )
    seconds = round(time.monotonic() - started, 1)
    tail = "\n".join(done.stdout.splitlines()[-30:])
    row = Row(
        name,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        seconds,
        done.returncode == 0,
        {},
        [tail.splitlines()[-1] if tail else ""],
    )
    if done.returncode != 0:
        row.error = tail
    return row


async def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--quick", action="store_true", help="only the short subset")
    parser.add_argument("--only", action="append", default=[], help="a scenario (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--json", type=Path, default=REPO / ".artifacts" / "chaos.json")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-suites", action="store_true", help="skip the pytest rows")
    args = parser.parse_args()
    if args.list:
        for scenario in SCENARIOS:
            kind = "quick" if scenario.quick else "full "
            print(f"{scenario.name:<34} {kind} {scenario.description}")
        for name in PYTEST_ROWS:
            print(f"{name:<34} full  (pytest)")
        return 0
    kafka, mongodb = settings_from_env()
    # The readiness probes of the private brokers refuse connections on purpose while they start.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    if args.only:
        chosen = [by_name(n) for n in args.only if n not in PYTEST_ROWS]
        suites = {n: p for n, p in PYTEST_ROWS.items() if n in args.only}
    else:
        chosen = [s for s in SCENARIOS if s.quick or not args.quick]
        suites = {} if args.quick or args.no_suites else PYTEST_ROWS
    workdir = args.workdir or default_workdir()
    print(f"chaos: {len(chosen)} scenarios, logs under {workdir}", flush=True)
    rows: list[Row] = []
    for scenario in chosen:
        print(f"chaos: {scenario.name} ...", flush=True)
        row = await run_scenario(
            scenario, kafka=kafka, mongodb=mongodb, workdir=workdir / scenario.name
        )
        print(
            f"chaos: {scenario.name}: {'ok' if row.ok else 'FAILED'} in {row.seconds}s", flush=True
        )
        rows.append(row)
        write_json(rows, args.json, mode="quick" if args.quick else "full")
    for name, paths in suites.items():
        print(f"chaos: {name} ...", flush=True)
        rows.append(await asyncio.to_thread(_pytest_row, name, paths))
        write_json(rows, args.json, mode="quick" if args.quick else "full")
    print(table(rows))
    print(f"\nwritten to {args.json}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
