"""Which fetched messages may be handled now, and which offsets may be committed: the pure core
of a consumer that handles many messages at once but those of one key strictly in order (issue
19; the approach of Confluent's parallel consumer). No I/O: the consumer around it fetches,
runs handlers and commits; this decides.

- **Order per key.** At most one message of a key is in flight; the next of that key starts only
  when it is done. Messages of different keys start in fetch order, up to ``limit`` in flight.
- **Commits never skip.** A partition may be committed up to its lowest offset not done yet (or
  one past the highest taken, when all are done: offsets may have gaps), so a crash redelivers
  every message not finished (and perhaps some finished past the commit point, which the
  handlers' idempotency guards absorb), never skips one.
- **Back-pressure.** ``full`` says to stop fetching (pause the partitions) while ``max_held``
  messages are held (in flight or waiting behind their key), so memory stays bounded under any
  backlog.
- **Rebalance.** ``revoke`` forgets a partition's messages: what was not committed is redelivered
  to the partition's next owner. The consumer then waits for the partition's messages still in
  flight (``in_flight_of``) before it lets the partition go (aiokafka's rebalance listener may
  await), so that one key never runs on two replicas at once.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
Partition = Hashable


@dataclass(frozen=True)
class Held(Generic[T]):
    """One fetched message: where it came from, its key, and what the caller attached."""

    partition: Partition
    offset: int
    key: Hashable
    item: T


@dataclass
class _PartitionProgress:
    """One partition's offsets held and not done yet, and how far it may be committed. Offsets
    may have gaps (transaction markers, compaction), so the commit point is the lowest offset
    still pending, or one past the highest seen when none is."""

    pending: list[int] = field(default_factory=list)
    """A heap of the offsets held and not done (done ones are dropped lazily)."""
    pending_set: set[int] = field(default_factory=set)
    highest: int = -1
    committed: int = -1
    """The commit point last returned."""

    def commit_point(self) -> int:
        while self.pending and self.pending[0] not in self.pending_set:
            heapq.heappop(self.pending)
        return self.pending[0] if self.pending else self.highest + 1


class KeyedWindow(Generic[T]):
    def __init__(self, *, limit: int, max_held: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if max_held < limit:
            raise ValueError("max_held must be >= limit")
        self.limit = limit
        self.max_held = max_held
        self._waiting: dict[Hashable, deque[Held[T]]] = {}
        """Per key, its messages not started yet, oldest first."""
        self._busy: set[Hashable] = set()
        """Keys with a message in flight."""
        self._ready: deque[Hashable] = deque()
        """Keys whose oldest waiting message may start (not busy), in the order they became so."""
        self._in_flight = 0
        self._held = 0
        self._partitions: dict[Partition, _PartitionProgress] = {}
        self._running: dict[Partition, int] = {}
        """Per partition, its messages in flight."""

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def held(self) -> int:
        return self._held

    def in_flight_of(self, partition: Partition) -> int:
        """Messages of ``partition`` started and not finished yet (revoked or not)."""
        return self._running.get(partition, 0)

    @property
    def full(self) -> bool:
        """Stop fetching: the window holds as many messages as it may."""
        return self._held >= self.max_held

    def offer(self, message: Held[T]) -> None:
        """Take a fetched message. Offsets of a partition come in increasing order (as a consumer
        fetches them); one at or below the highest already taken is a redelivery, ignored."""
        progress = self._partitions.get(message.partition)
        if progress is None:
            # The first offset read is where the partition was committed: nothing to commit
            # until the window moves past it.
            progress = _PartitionProgress(highest=message.offset - 1, committed=message.offset)
            self._partitions[message.partition] = progress
        if message.offset <= progress.highest:
            return  # a redelivery of one held or committed already
        progress.highest = message.offset
        progress.pending_set.add(message.offset)
        heapq.heappush(progress.pending, message.offset)
        self._held += 1
        queue = self._waiting.setdefault(message.key, deque())
        queue.append(message)
        if len(queue) == 1 and message.key not in self._busy:
            self._ready.append(message.key)

    def start(self) -> list[Held[T]]:
        """The messages to hand to handlers now (each once), within the limit and the order of
        each key."""
        started = []
        while self._ready and self._in_flight < self.limit:
            key = self._ready.popleft()
            queue = self._waiting[key]
            message = queue.popleft()
            if not queue:
                del self._waiting[key]
            self._busy.add(key)
            self._in_flight += 1
            self._running[message.partition] = self._running.get(message.partition, 0) + 1
            started.append(message)
        return started

    def finish(self, message: Held[T]) -> int | None:
        """A started message is done (handled, or dead-lettered): its key may go on. Returns the
        offset to commit for its partition when the commit point moved (Kafka's convention: the
        next offset to read), else None."""
        self._busy.discard(message.key)
        self._in_flight -= 1
        self._held -= 1
        self._running[message.partition] -= 1
        if not self._running[message.partition]:
            del self._running[message.partition]
        if message.key in self._waiting:
            self._ready.append(message.key)
        progress = self._partitions.get(message.partition)
        if progress is None:  # revoked while in flight: its next owner has it
            return None
        progress.pending_set.discard(message.offset)
        point = progress.commit_point()
        if point <= progress.committed:
            return None
        progress.committed = point
        return point

    def abandon(self, message: Held[T]) -> None:
        """A started message was given up unfinished (cancelled: the replica stops or loses its
        partition). Its offset stays pending, so no commit ever passes it and it is delivered
        again; the key's waiting messages are dropped with it (kept pending too), since none
        may run before it."""
        self._busy.discard(message.key)
        self._in_flight -= 1
        self._held -= 1
        self._running[message.partition] -= 1
        if not self._running[message.partition]:
            del self._running[message.partition]
        queue = self._waiting.pop(message.key, None)
        if queue:
            self._held -= len(queue)
            self._ready = deque(k for k in self._ready if k != message.key)

    def drop_waiting(self, partition: Partition) -> None:
        """Stop starting ``partition``'s messages (it is being revoked): those not started are
        dropped but stay pending, so the commit point can still move up to the first of them
        as the partition's in-flight messages finish, and no further."""
        for key in list(self._waiting):
            queue = self._waiting[key]
            kept = deque(m for m in queue if m.partition != partition)
            self._held -= len(queue) - len(kept)
            if kept:
                self._waiting[key] = kept
            else:
                del self._waiting[key]
        self._ready = deque(k for k in self._ready if k in self._waiting)

    def forget(self, partition: Partition) -> None:
        """Forget a partition: what it held and did not commit is its next owner's to read.
        Its messages still in flight, when they finish, commit nothing."""
        self._partitions.pop(partition, None)

    def revoke(self, partition: Partition) -> None:
        """Forget a partition taken away by a rebalance at once: its waiting messages are
        dropped (they were not committed, so its next owner reads them), and its in-flight ones,
        when they finish, commit nothing. (A consumer that can wait for the in-flight ones calls
        ``drop_waiting``, then ``forget`` once they are done, to commit what they finished.)"""
        self.drop_waiting(partition)
        self.forget(partition)
