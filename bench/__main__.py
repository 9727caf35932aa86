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
from typing import Any

from bench import goals, idle_streams, report
from bench.modes import MODES, Mode
from bench.run import (
    log,
    measure,
    measure_concurrency,
    measure_embedded,
    measure_history,
    measure_idle_streams,
    measure_latency,
    measure_sdk,
    measure_turns,
    scratch,
    write,
)
from tests.e2e.cluster import REPO

DOCS = REPO / "docs" / "benchmarks.md"
FINDINGS = REPO / "bench" / "findings.md"
"""The hand-written reading of the figures (what limits them, what was fixed, what is next),
placed on the page after the generated findings."""
EMBEDDED_ONLY_MONGODB = "mongodb://127.0.0.1:27117/"
"""What ``--embedded-only`` passes on to its peer's command line when no store is set (the peer,
DBOS on SQLite, never connects to it)."""


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


def _parser() -> argparse.ArgumentParser:
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
        "--sdk-only",
        action="store_true",
        help="only section 12 (one langgraph-sdk workload on Interlock and on LangGraph's Agent"
        " Server) at the mode's sizes; JSON to --out or bench/results/sdk/, the page untouched",
    )
    parser.add_argument(
        "--turns-only",
        action="store_true",
        help="only section 13 (a conversation's turn as it grows) at the mode's sizes; JSON to"
        " --out, or to bench/results/turns/ and then recorded into the mode's summary"
        " (bench/results/<mode>/summary.json, when there is one) with its own date, and the"
        " page regenerated",
    )
    parser.add_argument(
        "--embedded-only",
        action="store_true",
        help="only the embedded figure (interlock dev) and its DBOS-on-SQLite peer, in one run,"
        " both latencies at the embedded one's rate, with the two targets between them; needs"
        " no Kafka or MongoDB; JSON to --out or bench/results/embedded/, the page untouched",
    )
    parser.add_argument(
        "--idle-streams-window",
        type=float,
        metavar="SECONDS",
        help="with --idle-streams-only: the measured window (default: the mode's)",
    )
    return parser


@dataclasses.dataclass(frozen=True)
class Session:
    """What every measuring command needs: the mode, the infrastructure, a scratch folder."""

    mode: Mode
    kafka: str
    mongodb: str
    workdir: Path


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _history_only(session: Session, out: Path | None) -> None:
    s = session
    only = asyncio.run(measure_history(s.mode, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir))
    path = (out or REPO / "bench" / "results" / "history") / (
        f"history-{s.mode.history_prefill}.json"
    )
    _write_json(path, only)
    log(f"wrote {path}")


def _concurrency_only(session: Session, out: Path | None) -> None:
    s = session
    result = asyncio.run(
        measure_concurrency(s.mode, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir)
    )
    folder = out or REPO / "bench" / "results" / "concurrency"
    path = folder / f"concurrency-{s.mode.name}.json"
    _write_json(path, result["summary"])
    (folder / f"concurrency-{s.mode.name}.raw.json").write_text(json.dumps(result["raw"]) + "\n")
    log(f"wrote {path} (and its .raw.json)")


def _latency_only(session: Session, rates: list[float], out: Path | None) -> None:
    s = session
    figure = asyncio.run(
        measure_latency(s.mode, rates, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir)
    )
    path = (out or REPO / "bench" / "results" / "latency") / f"latency-{s.mode.name}.json"
    _write_json(path, figure)
    for rate, lat in figure["latency"].items():
        row = {k: (v.get("p50_ms"), v.get("p99_ms")) for k, v in lat["median"].items()}
        print(f"{rate}/s p50, p99 ms: {row}")
    log(f"wrote {path}")


def _idle_streams_only(
    session: Session, streams: int, window: float | None, out: Path | None
) -> None:
    s = session
    sizes = idle_streams.sizes_for(s.mode.name, streams or None, window)
    figure = asyncio.run(
        measure_idle_streams(s.mode, sizes, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir)
    )
    path = (out or REPO / "bench" / "results" / "idle-streams") / (
        f"idle-streams-{s.mode.name}-{sizes.streams}.json"
    )
    _write_json(path, figure)
    print(json.dumps(figure["idle_streams"], indent=2, sort_keys=True))
    log(f"wrote {path}")


def _sdk_only(session: Session, out: Path | None) -> None:
    s = session
    result = asyncio.run(measure_sdk(s.mode, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir))
    folder = out or REPO / "bench" / "results" / "sdk"
    path = folder / f"sdk-{s.mode.name}.json"
    _write_json(path, result["summary"])
    (folder / f"sdk-{s.mode.name}.raw.json").write_text(json.dumps(result["raw"]) + "\n")
    print(json.dumps(result["summary"]["sdk_workload"]["ratios"], indent=2, sort_keys=True))
    log(f"wrote {path} (and its .raw.json)")


def _embedded_only(session: Session, out: Path | None) -> None:
    s = session
    result = asyncio.run(measure_embedded(s.mode, mongodb=s.mongodb, workdir=s.workdir))
    folder = out or REPO / "bench" / "results" / "embedded"
    path = folder / f"embedded-{s.mode.name}.json"
    _write_json(path, result["summary"])
    (folder / f"embedded-{s.mode.name}.raw.json").write_text(json.dumps(result["raw"]) + "\n")
    figures = result["summary"]["figures"]
    for name, figure in (("embedded", figures["embedded"]), *figures["peers"].items()):
        throughput, latency = figure["throughput"], figure["latency"]["median"]
        p50 = {k: v.get("p50_ms") for k, v in latency.items()}
        print(
            f"{name}: {throughput['per_second']}/s, {throughput['cpu_ms_per_execution']} ms CPU"
            f" per execution; p50 ms at {figure['latency']['rate_per_second']}/s: {p50}"
        )
    same = result["summary"]["throughput_at_the_same_load"]
    print(f"the same load on both ({same['offered']}): {json.dumps(same)}")
    for t in result["summary"]["targets"]:
        print(f"{t['name']}: {t['measured']} (goal {t['goal']}, met {t['met']})")
    log(f"wrote {path} (and its .raw.json)")


def _turns_only(session: Session, out: Path | None, docs: Path | None) -> None:
    s = session
    result = asyncio.run(measure_turns(s.mode, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir))
    folder = out or REPO / "bench" / "results" / "turns"
    path = folder / f"turns-{s.mode.name}.json"
    _write_json(path, result["summary"])
    (folder / f"turns-{s.mode.name}.raw.json").write_text(json.dumps(result["raw"]) + "\n")
    log(f"wrote {path} (and its .raw.json)")
    growth = result["summary"].get("growth", {})
    print(json.dumps({k: growth.get(k) for k in ("commands", "latency_ms")}, indent=2))
    summary_path = REPO / "bench" / "results" / s.mode.name / "summary.json"
    if out is not None or s.mode.name == "smoke" or not summary_path.exists():
        return
    summary = json.loads(summary_path.read_text())
    summary["figures"]["turns"] = result["summary"]
    summary["targets"] = goals.evaluate(summary["figures"])
    summary_path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    page = docs or DOCS
    regenerate(summary_path, page)
    log(f"recorded section 13 into {summary_path}; wrote {page}")


def _every_figure(session: Session, out: Path | None, docs: Path | None) -> None:
    s = session
    result = asyncio.run(measure(s.mode, kafka=s.kafka, mongodb=s.mongodb, workdir=s.workdir))
    summary_path, raw_path = write(result, out or REPO / "bench" / "results" / s.mode.name)
    log(f"wrote {summary_path} and {raw_path}")
    # The smoke mode's figures mean nothing: it never overwrites the published page by default.
    page = docs or (DOCS if s.mode.name != "smoke" else None)
    if page is not None:
        regenerate(summary_path, page)
        log(f"wrote {page}")


def main() -> None:
    args = _parser().parse_args()
    if args.report is not None:
        regenerate(args.report, args.docs or DOCS)
        return
    mode = MODES[args.mode or "quick"]
    if args.history_only is not None:
        mode = dataclasses.replace(mode, history_prefill=args.history_only)
    kafka = os.environ.get("INTERLOCK_KAFKA_BOOTSTRAP_SERVERS")
    mongodb = os.environ.get("INTERLOCK_MONGODB_URI")
    if args.embedded_only:  # one process on SQLite, and a peer on SQLite: no infrastructure
        kafka, mongodb = kafka or "", mongodb or EMBEDDED_ONLY_MONGODB
    elif not kafka or not mongodb:
        sys.exit(
            "set INTERLOCK_KAFKA_BOOTSTRAP_SERVERS and INTERLOCK_MONGODB_URI (`make bench` starts"
            " the local Kafka and FerretDB and sets them)"
        )
    workdir = scratch(args.keep)
    log(f"{mode.name} mode; scratch {workdir}")
    session = Session(mode, kafka, mongodb, workdir)
    if args.history_only is not None:
        _history_only(session, args.out)
    elif args.concurrency_only:
        _concurrency_only(session, args.out)
    elif args.latency_only:
        _latency_only(session, args.latency_only, args.out)
    elif args.idle_streams_only is not None:
        _idle_streams_only(session, args.idle_streams_only, args.idle_streams_window, args.out)
    elif args.sdk_only:
        _sdk_only(session, args.out)
    elif args.embedded_only:
        _embedded_only(session, args.out)
    elif args.turns_only:
        _turns_only(session, args.out, args.docs)
    else:
        _every_figure(session, args.out, args.docs)


if __name__ == "__main__":
    main()
