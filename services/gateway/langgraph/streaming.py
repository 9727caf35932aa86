"""``runs.stream`` and ``runs.join_stream``: a run as LangGraph's server-sent events, pushed as
the run goes (services/gateway/langgraph/run_events.py makes them).

The events come from what Interlock's own execution stream is made of (services/gateway/
stream.py): the sandbox's progress batches and the orchestrator's changes, heard on
``execution.activity``; the store is read only to replay what a joining stream missed (the
run's stored progress, once) and when a change says the run stopped. Every run is resumable:
its events are made again from its stored progress, with the same ids, so a join with
``Last-Event-ID`` continues after the last event seen (``-1``: from the run's start; none: from
now on), whether or not the run was started with ``stream_resumable``.

A run that fails ends with an ``error`` event, and so does a stream whose key was revoked while
it was open (the key re-check of services/gateway/stream.py). Pure but for the reads the caller
passes in.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from fastapi.sse import ServerSentEvent

from services.gateway.feed import Watch
from services.gateway.langgraph.carried import advanced
from services.gateway.langgraph.run_events import EventPosition, RunEvents
from services.gateway.langgraph.views import last_run_epoch, segment_done
from services.gateway.stream import KEY_REVOKED
from shared.domain.execution import Execution
from shared.store.progress import ProgressEntry

STREAM_CLOSED = "stream closed before the run stopped: join the run"


def ended_error(why: str) -> dict[str, str]:
    """The ``error`` event of a stream its key's re-check ended (``KEY_REVOKED``: a 401 to a
    wait; else the key could not be read again)."""
    return {"error": "Unauthenticated" if why == KEY_REVOKED else "KeyCheckFailed", "message": why}


@dataclass(frozen=True)
class Replay:
    """What a joining stream sends of what happened before it: the events after ``after``
    (None: all of them), or none of them (``from_now``)."""

    after: EventPosition | None = None
    from_now: bool = False


@dataclass
class StreamEnd:
    """How a run's stream ended: ``stopped`` once the run stopped and every event was sent,
    ``closed`` when the server closed it first (its lifetime, its key, a slow reader); neither
    when the client went away (``on_disconnect``)."""

    stopped: bool = False
    closed: bool = False


async def run_events(
    watch: Watch,
    execution: Execution,
    events: RunEvents,
    reread: Callable[[], Awaitable[Execution]],
    seconds: float,
    *,
    stored: list[ProgressEntry] | None = None,
    replay: Replay | None = None,
    end: StreamEnd | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """The run's events from its start to its stop (or ``seconds``, or its watch ending: then a
    comment says to join the run). The watch was registered before the run started, or before
    ``execution`` and ``stored`` (the run's progress so far) were read, so nothing is missed;
    with ``replay`` only the events after the one it names are sent."""
    end = end or StreamEnd()
    sent = _Filter(replay or Replay())
    for event in sent(events.opening()):
        yield event
    for event in sent(events.progress(stored or [])):
        yield event
    if not stopped(execution, events.epoch):
        sent.caught_up()  # what comes now is news (a run that had stopped has none)
    left = seconds
    while not stopped(execution, events.epoch):
        if watch.ended is not None:
            # Its key was revoked (or could not be read again): the client raises the error.
            end.closed = True
            yield ServerSentEvent(event="error", data=ended_error(watch.ended))
            return
        if left <= 0 or watch.overflowed:
            end.closed = True
            yield ServerSentEvent(comment=STREAM_CLOSED)
            return
        started = time.monotonic()
        arrived = await watch.next(left)
        left -= time.monotonic() - started
        if watch.ended is not None:
            continue  # nothing more for this key, whatever arrived with the ending
        for activity in arrived:
            if activity.progress is not None:
                entries = [item.entry() for item in activity.progress]
                for event in sent(events.progress(entries)):
                    yield event
            else:
                # A change that stops the run carries the execution: no read (carried.py).
                execution = advanced(execution, [activity]) or await reread()
    for event in sent(events.closing(execution, superseded=superseded(execution, events.epoch))):
        yield event
    end.stopped = True


def stopped(execution: Execution, epoch: int) -> bool:
    """Has the run of ``epoch`` stopped: at a suspension, with the execution's end, or with a
    later run of its turn after it (a join of an earlier run)?"""
    return segment_done(execution, epoch) or superseded(execution, epoch)


def superseded(execution: Execution, epoch: int) -> bool:
    """Did a later run of the turn follow the run of ``epoch`` (its stop is not kept then)?"""
    return last_run_epoch(execution, decided=False) > epoch


class _Filter:
    """Drops what a joining client saw already: the events up to its ``Last-Event-ID``, or,
    joining without one, everything that happened before it joined."""

    def __init__(self, replay: Replay) -> None:
        self._replay = replay
        self._live = False

    def caught_up(self) -> None:
        self._live = True

    def __call__(self, events: list[ServerSentEvent]) -> list[ServerSentEvent]:
        if self._replay.from_now:
            return events if self._live else []
        after = self._replay.after
        if after is None:
            return events
        return [e for e in events if e.id is None or _position(e.id) > after]


def _position(event_id: str) -> EventPosition:
    key, _, n = event_id.rpartition("-")
    return EventPosition(key, int(n))
