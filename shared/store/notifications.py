"""Notification deliveries: one per (execution, suspension, channel), and who sends which attempt.

The notifier enqueues a delivery when it sees ``execution.suspended`` (a redelivered event
enqueues nothing new), polls for deliveries that are due, and before sending attempt ``n`` claims
it. The claim is an insert under a unique id, the one write that is atomic on every
MongoDB-compatible server (FerretDB 1.x runs conditional updates non-atomically), so of several
notifier replicas exactly one sends each attempt. Only the claimer records the outcome.

The poll runs every second on every replica, so it reads only what is still pending, never the
history of every delivery ever made (which the API lists): on MongoDB an outbox collection of its
own, on SQLite an index that starts with the status (see each adapter).

The whole ``Delivery`` is kept as JSON text (agent data may have keys no server accepts), next to
the fields queries use. Times are copied out as fixed-width UTC ISO strings (microseconds), so
they compare and sort as text the same way in MongoDB, SQLite and memory, and the JSON body keeps
every datetime exactly: a delivery read back equals the one written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from shared.notifications.model import Delivery, DeliveryStatus
from shared.store.cursor import InvalidCursor, decode_cursor, encode_cursor

MAX_ATTEMPT = 999_999

"""Attempt numbers are six digits wide in claim ids (see ``claim_id``)."""


class NotificationStore(Protocol):
    async def enqueue(self, delivery: Delivery) -> bool:
        """Store a new delivery unless one with this delivery_id exists (a redelivered
        execution.suspended); True if stored now."""
        ...

    async def due(self, now: datetime, *, limit: int = 50) -> list[Delivery]:
        """Pending deliveries whose next_attempt_at <= now, oldest next_attempt_at first.

        Reads only deliveries still pending, whatever the history holds. After a crash in the
        middle of recording an outcome it may list a delivery that has in fact finished (at the
        attempt it lists as next, or before): that attempt's claim is taken, so it is not sent
        again, and ``latest`` stops the listing."""
        ...

    async def claim(self, delivery_id: str, attempt: int, owner: str) -> bool:
        """Reserve attempt number ``attempt`` (1-based) of a delivery: of concurrent claimers
        exactly one gets True, also across processes."""
        ...

    async def record(self, delivery: Delivery) -> None:
        """Store the delivery's new state after an attempt (only the claimer of that attempt
        calls this). A retry state recorded once the delivery has finished (by a replica frozen
        past the lost-claim takeover, whose attempt another replica took over and completed) is
        dropped: it never makes the delivery due again."""
        ...

    async def latest(self, delivery_id: str) -> Delivery | None:
        """The delivery's current state, read by id (None: never enqueued): for telling an attempt
        lost with its replica from one still being made. A finished delivery that ``due`` still
        listed (a crash between the writes of its last outcome) is no longer listed after this."""
        ...

    async def get(self, project_id: str, delivery_id: str) -> Delivery | None: ...

    async def list(
        self,
        project_id: str,
        *,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
        workspaces: list[str] | None = None,
    ) -> tuple[list[Delivery], str | None]:
        """Oldest first (updated_at, then delivery_id), ``limit`` at a time; ``cursor`` is a
        previous page's next cursor. A cursor this store did not return raises InvalidCursor.
        ``workspaces``: only deliveries of these workspaces (None: all of the project), so a
        page and its cursor never come from a workspace the caller may not see."""
        ...


def time_key(value: datetime) -> str:
    """A time as text that sorts like the time: UTC, fixed width, microseconds."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def claim_id(delivery_id: str, attempt: int) -> str:
    """``<delivery_id>:<attempt>``; the attempt's fixed width keeps two pairs from sharing an id
    (delivery ids contain colons)."""
    if not 1 <= attempt <= MAX_ATTEMPT:
        raise ValueError(f"attempt must be between 1 and {MAX_ATTEMPT}, not {attempt}")
    return f"{delivery_id}:{attempt:06d}"


def list_key(delivery: Delivery) -> tuple[str, str]:
    """Where a delivery sorts in ``list``: (updated_at as ``time_key``, delivery_id)."""
    return time_key(delivery.updated_at), delivery.delivery_id


def page_cursor(page: list[Delivery], more: bool) -> str | None:
    return encode_cursor(*list_key(page[-1])) if more and page else None


def decode_list_cursor(cursor: str) -> tuple[str, str]:
    """The (updated key, delivery id) a page ended at; InvalidCursor for anything else."""
    updated_key, delivery_id = decode_cursor(cursor)
    try:
        valid = time_key(datetime.fromisoformat(updated_key)) == updated_key
    except ValueError:
        valid = False
    if not valid:
        raise InvalidCursor("cursor is not one this API returned")
    return updated_key, delivery_id
