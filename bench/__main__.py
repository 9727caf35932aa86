"""``python -m bench [--quick | --full | --smoke]``: measure, write JSON, regenerate the page.
``python -m bench --report SUMMARY.json``: regenerate the page from an existing summary."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path

from bench import idle_streams, report
from bench.modes import MODES
from bench.run import (
    log,
    measure,
    measure_concurrency,
    measure_history,
    measure_idle_streams,
    measure_latency,
    scratch,
    write,
)
from tests.e2e.cluster import REPO

DOCS = REPO / "docs" / "benchmarks.md"
FINDINGS = REPO / "bench" / "findings.md"
"""The hand-written reading of the figures (what limits them, what was fixed, what is next),
placed on the page after the generated findings."""


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def regenerate(summary_path: Path, docs: Path) -> None:
    summary = json.loads(summary_path.read_text())
    docs.parent.mkdir(parents=True, exist_ok=True)
    findings = FINDINGS.read_text() if FINDINGS.exists() else ""
    docs.write_text(report.render(summary, _relative(summary_path), findings))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    chosen = parser.add_mutually_exclusive_group()
    for name in MODES:
        chosen.add_argument(
            f"--{name}", dest="mode", action="store_const", const=name, help=f"{name} mode"
        )
    parser.add_argument("--out", type=Path, help="where the JSON goes (bench/results/<mode>/)")
    parser.add_argument("--docs", type=Path, help=f"the page to write (quick/full: {DOCS})")
    parser.add_argument("--keep", action="store_true", help="keep service logs and profiles")
    parser.add_argument("--report", type=Path, metavar="SUMMARY", help="only regenerate the page")
    parser.add_argument(
        "--history-only",
        type=int,
        metavar="PREFILL",
        help="only figure 8 (history growth), with PREFILL finished executions stored; JSON to"
        " --out or bench/results/history/, the page untouched",
    )
    parser.add_argument(
        "--concurrency-only",
        action="store_true",
        help="only figures 9 and 10 (executions in flight per sandbox replica, memory under a"
        " backlog) at the mode's sizes; JSON to --out or bench/results/concurrency/, the page"
        " untouched",
    )
    parser.add_argument(
        "--latency-only",
        type=float,
        nargs="+",
        metavar="RATE",
        help="only figure 2 (latency), separate processes with 1 sandbox, at each RATE arrivals"
        " a second; p50 / p99 printed, JSON to --out or bench/results/latency/, the page"
        " untouched",
    )
    parser.add_argument(
        "--idle-streams-only",
        type=int,
        nargs="?",
        const=0,
        metavar="STREAMS",
        help="only the idle streams' cost on one gateway, with STREAMS streams (default: the"
        " mode's); JSON to --out or bench/results/idle-streams/, the page untouched",
    )
    parser.add_argument(
        "--idle-streams-window",
        type=float,
        metavar="SECONDS",
        help="with --idle-streams-only: the measured window (default: the mode's)",
    )
    args = parser.parse_args()
    if args.report is not None:
        regenerate(args.report, args.docs or DOCS)
        return
    mode = MODES[args.mode or "quick"]
    if args.history_only is not None:
        mode = dataclasses.replace(mode, history_prefill=args.history_only)
    kafka = os.environ.get("INTERLOCK_KAFKA_BOOTSTRAP_SERVERS")
    mongodb = os.environ.get("INTERLOCK_MONGODB_URI")
    if not kafka or not mongodb:
        sys.exit(
            "set INTERLOCK_KAFKA_BOOTSTRAP_SERVERS and INTERLOCK_MONGODB_URI (`make bench` starts"
            " the local Kafka and FerretDB and sets them)"
        )
    workdir = scratch(args.keep)
    log(f"{mode.name} mode; scratch {workdir}")
    if args.history_only is not None:
        only = asyncio.run(measure_history(mode, kafka=kafka, mongodb=mongodb, workdir=workdir))
        path = (args.out or REPO / "bench" / "results" / "history") / (
            f"history-{mode.history_prefill}.json"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(only, indent=2, sort_keys=True) + "\n")
        log(f"wrote {path}")
        return
    if args.concurrency_only:
        result = asyncio.run(
            measure_concurrency(mode, kafka=kafka, mongodb=mongodb, workdir=workdir)
        )
        out = args.out or REPO / "bench" / "results" / "concurrency"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"concurrency-{mode.name}.json"
        path.write_text(json.dumps(result["summary"], indent=2, sort_keys=True) + "\n")
        (out / f"concurrency-{mode.name}.raw.json").write_text(json.dumps(result["raw"]) + "\n")
        log(f"wrote {path} (and its .raw.json)")
        return
    if args.latency_only:
        figure = asyncio.run(
            measure_latency(mode, args.latency_only, kafka=kafka, mongodb=mongodb, workdir=workdir)
        )
        path = (args.out or REPO / "bench" / "results" / "latency") / f"latency-{mode.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figure, indent=2, sort_keys=True) + "\n")
        for rate, lat in figure["latency"].items():
            row = {k: (v.get("p50_ms"), v.get("p99_ms")) for k, v in lat["median"].items()}
            print(f"{rate}/s p50, p99 ms: {row}")
        log(f"wrote {path}")
        return
    if args.idle_streams_only is not None:
        sizes = idle_streams.sizes_for(
            mode.name, args.idle_streams_only or None, args.idle_streams_window
        )
        figure = asyncio.run(
            measure_idle_streams(mode, sizes, kafka=kafka, mongodb=mongodb, workdir=workdir)
        )
        path = (args.out or REPO / "bench" / "results" / "idle-streams") / (
            f"idle-streams-{mode.name}-{sizes.streams}.json"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figure, indent=2, sort_keys=True) + "\n")
        print(json.dumps(figure["idle_streams"], indent=2, sort_keys=True))
        log(f"wrote {path}")
        return
    result = asyncio.run(measure(mode, kafka=kafka, mongodb=mongodb, workdir=workdir))
    out = args.out or REPO / "bench" / "results" / mode.name
    summary_path, raw_path = write(result, out)
    log(f"wrote {summary_path} and {raw_path}")
    # The smoke mode's figures mean nothing: it never overwrites the published page by default.
    docs = args.docs or (DOCS if mode.name != "smoke" else None)
    if docs is not None:
        regenerate(summary_path, docs)
        log(f"wrote {docs}")


if __name__ == "__main__":
    main()
