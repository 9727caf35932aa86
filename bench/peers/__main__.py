"""``python -m bench.peers KIND``: one open-loop run of a peer, printed as JSON on stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from bench.peers import postgres

KINDS = ("langgraph-mongodb", "langgraph-sqlite", "dbos-sqlite", "dbos-postgres")


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    message = f"bench steps={args.steps}"
    if args.kind.startswith("dbos-"):
        from bench.peers import dbos_peer

        database = (
            dbos_peer.on_postgres(args.postgres or postgres.server_url(args.mongodb))
            if args.kind == "dbos-postgres"
            else dbos_peer.on_sqlite(args.workdir)
        )
        async with database as system_database:
            return await dbos_peer.run(
                system_database,
                rate=args.rate,
                count=args.count,
                steps=args.steps,
                timeout=args.timeout,
            )
    from bench.peers import langgraph_peer

    saver = (
        langgraph_peer.mongo_saver(args.mongodb)
        if args.kind == "langgraph-mongodb"
        else langgraph_peer.sqlite_saver(args.workdir)
    )
    async with saver as checkpointer:
        return await langgraph_peer.run(
            checkpointer, rate=args.rate, count=args.count, message=message, timeout=args.timeout
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--mongodb", default="mongodb://127.0.0.1:27117/")
    parser.add_argument(
        "--postgres",
        help=f"dbos-postgres's server (default: ${postgres.SERVER_URI}, else the PostgreSQL the"
        " FerretDB at --mongodb runs on); a database is created on it for the run and dropped",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # DBOS logs every start at INFO
    try:
        result = asyncio.run(_run(args))
    except postgres.Unavailable as exc:
        sys.exit(f"peer {args.kind}: {exc}")  # the reason, not a traceback, is what the bench shows
    print(json.dumps(result))


if __name__ == "__main__":
    main()
