"""Attempts: which run of a dispatch is the current one (the fencing token).

Every time the sandbox starts running a dispatch (epoch) it begins a new attempt: the first run,
a redelivery after a crash, another replica taking over a partition. Beginning attempt ``n + 1``
supersedes attempt ``n``; a superseded attempt (a replica paused past its lease that wakes up)
must not write checkpoints, step results or reports. Beginning is an insert under a unique
``_id``, so of two replicas racing for the same attempt number exactly one gets it.
"""

from __future__ import annotations

import os
import socket
from typing import Protocol


class AttemptLedger(Protocol):
    async def begin(self, execution_id: str, epoch: int) -> int:
        """Start a new attempt at ``epoch``; return its number (1 for the first)."""
        ...

    async def is_superseded(self, execution_id: str, epoch: int, attempt: int) -> bool:
        """Has a later attempt at this epoch begun?"""
        ...


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
