"""``python -m bench.peers KIND``: one open-loop run of a peer, printed as JSON on stdout."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from pathlib import Path
from typing import Any

KINDS = ("langgraph-mongodb", "langgraph-sqlite", "dbos-sqlite")


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    message = f"bench steps={args.steps}"
    if args.kind == "dbos-sqlite":
        from bench.peers import dbos_peer

        return await dbos_peer.run(
            args.workdir, rate=args.rate, count=args.count, steps=args.steps, timeout=args.timeout
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
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # DBOS logs every start at INFO
    print(json.dumps(asyncio.run(_run(args))))


if __name__ == "__main__":
    main()
