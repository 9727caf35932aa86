"""Loopback ports for the servers the tests start, safe with several test workers at once.

A port found by binding to port 0 and letting it go can be taken by anything before the server
that was handed it binds it: the kernel hands out that range for every outgoing connection too,
and with ``make test`` running three workers (pytest-xdist) a service once failed to start on a
port another process had just taken. So the tests' ports come from below the kernel's ephemeral
range (32768 and up on Linux, 49152 on macOS), from a slice of their own per worker, in turn
from a random point, skipping any that is in use.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST_PORT = 20_000
PORTS_PER_WORKER = 1_000
WORKER_SLICES = 12
"""Workers 0 to 11 get ports 20000 to 31999; a 13th shares the first's slice."""

_turn = itertools.count(random.randrange(PORTS_PER_WORKER))


def _worker() -> int:
    # pytest-xdist names its workers gw0, gw1, ...; a run without it is worker 0.
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def free_port() -> int:
    """A loopback port nothing listens on now, not handed out lately to this worker."""
    first = FIRST_PORT + (_worker() % WORKER_SLICES) * PORTS_PER_WORKER
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_turn) % PORTS_PER_WORKER
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {first}..{first + PORTS_PER_WORKER - 1}")
