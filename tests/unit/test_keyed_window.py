"""The keyed window (shared/keyed_window.py), the pure core of issue 19's concurrent consumer:
per-key order, the in-flight limit, commits that never skip an unfinished message, bounded
holding, rebalances. Handlers finish in orders Hypothesis picks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.keyed_window import Held, KeyedWindow

MESSAGES, KEYS, LIMIT = 200, 20, 5


def fetched(count: int = MESSAGES, keys: int = KEYS, partition: int = 0) -> list[Held[int]]:
    # Keys are partitioned by the producer: one key lives in one partition.
    return [
        Held(partition, offset, f"p{partition}-key-{offset % keys}", offset)
        for offset in range(count)
    ]


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.integers(min_value=0), min_size=MESSAGES, max_size=MESSAGES))
def test_many_at_once_each_key_in_order_and_commits_never_skip(picks: list[int]) -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=LIMIT, max_held=MESSAGES)
    for message in fetched():
        window.offer(message)
    running: list[Held[int]] = []
    handled: dict[str, list[int]] = {}
    committed = 0
    peak = 0
    for pick in picks:
        running.extend(window.start())
        peak = max(peak, len(running))
        assert len(running) == window.in_flight <= LIMIT
        assert len({m.key for m in running}) == len(running)  # one per key at a time
        message = running.pop(pick % len(running))
        handled.setdefault(str(message.key), []).append(message.offset)
        point = window.finish(message)
        if point is not None:
            assert point > committed
            committed = point
        # Everything below the commit point is handled; the first message above it is not.
        done = {offset for offsets in handled.values() for offset in offsets}
        assert set(range(committed)) <= done
        assert committed == MESSAGES or committed not in done
    assert committed == MESSAGES and window.held == 0 and window.in_flight == 0
    assert peak == LIMIT
    for offsets in handled.values():
        assert offsets == sorted(offsets)


def test_a_crash_redelivers_every_unfinished_message_and_skips_none() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=LIMIT, max_held=MESSAGES)
    for message in fetched():
        window.offer(message)
    finished: set[int] = set()
    committed = 0
    # Finish the newest of each started batch first, the oldest last: the commit point lags.
    for _ in range(30):
        started = window.start()
        for message in reversed(started):
            finished.add(message.offset)
            committed = window.finish(message) or committed
    redelivered = set(range(committed, MESSAGES))
    assert set(range(MESSAGES)) - finished <= redelivered  # none skipped
    assert all(offset in finished for offset in range(committed))


def test_a_slow_key_holds_back_only_its_own_messages() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=2, max_held=10)
    for offset, key in enumerate(["slow", "slow", "a", "b", "c"]):
        window.offer(Held(0, offset, key, offset))
    first = window.start()
    assert [m.offset for m in first] == [0, 2]  # the second "slow" waits for the first
    window.finish(first[1])
    assert [m.offset for m in window.start()] == [3]
    assert window.finish(Held(0, 3, "b", 3)) is None  # offset 0 still in flight: no commit


def test_it_says_when_to_stop_fetching() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=2, max_held=4)
    for message in fetched(count=4, keys=1):
        window.offer(message)
    assert window.full and window.held == 4
    [message] = window.start()  # one key: one at a time
    assert window.finish(message) == 1
    assert not window.full and window.held == 3


def test_offsets_with_gaps_are_committed_past_the_gap() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=3, max_held=10)
    for offset in (10, 11, 14):  # 12 and 13 are transaction markers: never fetched
        window.offer(Held(0, offset, f"k{offset}", offset))
    started = {m.offset: m for m in window.start()}
    assert window.finish(started[14]) is None
    assert window.finish(started[10]) == 11
    assert window.finish(started[11]) == 15


def test_a_redelivered_message_is_not_taken_twice() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=3, max_held=10)
    message = Held(0, 7, "k", 7)
    window.offer(message)
    window.offer(message)
    assert window.held == 1 and [m.offset for m in window.start()] == [7]


def test_a_revoked_partition_is_forgotten_and_commits_nothing() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=1, max_held=10)
    for message in fetched(count=3, keys=1, partition=0) + fetched(count=2, keys=2, partition=1):
        window.offer(message)
    [first] = window.start()
    assert first.partition == 0
    assert (window.in_flight_of(0), window.in_flight_of(1)) == (1, 0)
    window.revoke(0)
    assert window.held == 3  # partition 0's waiting two dropped; its in-flight one still held
    assert window.in_flight_of(0) == 1  # what the rebalance listener waits for
    assert window.finish(first) is None
    assert window.in_flight_of(0) == 0
    started = window.start()
    assert [(m.partition, m.offset) for m in started] == [(1, 0)]
    assert window.finish(started[0]) == 1
    assert [(m.partition, m.offset) for m in window.start()] == [(1, 1)]


def test_a_partition_being_revoked_commits_what_finishes_but_nothing_past_a_dropped_one() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=2, max_held=10)
    for message in fetched(count=4, keys=2):
        window.offer(message)
    first, second = window.start()  # offsets 0 and 1; 2 and 3 wait behind their keys
    window.drop_waiting(0)
    assert window.held == 2 and window.start() == []
    assert window.finish(first) == 1
    assert window.finish(second) == 2  # not past offset 2: it was dropped, never handled
    assert window.in_flight_of(0) == 0
    window.forget(0)
    window.offer(Held(0, 2, "p0-key-0", 2))  # the next assignment reads from the commit point
    assert [m.offset for m in window.start()] == [2]


def test_an_abandoned_message_is_never_committed_nor_overtaken_by_its_key() -> None:
    window: KeyedWindow[int] = KeyedWindow(limit=2, max_held=10)
    for message in fetched(count=4, keys=2):
        window.offer(message)
    first, second = window.start()
    window.abandon(first)  # offset 0 cancelled: offset 2, same key, must not run before it
    assert window.start() == [] and window.in_flight == 1
    assert window.finish(second) is None  # offset 0 is still pending
    assert [m.offset for m in window.start()] == [3]
    assert window.held == 1


def test_limits_must_make_sense() -> None:
    with pytest.raises(ValueError):
        KeyedWindow(limit=0, max_held=1)
    with pytest.raises(ValueError):
        KeyedWindow(limit=4, max_held=2)
