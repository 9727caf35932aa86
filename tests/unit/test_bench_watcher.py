"""The status watcher (bench, chaos) passes on status announcements and skips anything else on
the topic: the chaos suite publishes poison there, and a watcher that died on it went blind."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from bench.client import _changes_in
from bench.watchers import _status_of


def test_a_status_announcement_is_read() -> None:
    value = json.dumps({"execution_id": "e1", "status": "suspended", "sequence": 3}).encode()
    assert _status_of(value) == ("e1", "suspended")


def test_poison_is_skipped() -> None:
    for value in (b"not json", b"", None, b"[1, 2]", b'{"execution_id": "e1"}', b"\xff\xfe"):
        assert _status_of(value) is None


async def test_the_changes_feed_is_read_as_statuses_and_its_comments_skipped() -> None:
    """The embedded watcher's feed (``GET .../changes``): a ``change`` event's data is the
    execution as the API shows it; comments (keep-alives, the opening line) are not changes."""

    async def lines() -> AsyncIterator[str]:
        for line in [
            ": interlock workspace changes",
            "retry: 3000",
            "",
            "event: change",
            'data: {"execution_id": "e1", "status": "suspended", "agent": "a"}',
            "",
            ": ping",
            "",
            "event: change",
            'data: {"execution_id": "e2", "status": "completed"}',
            "",
        ]:
            yield line

    assert [c async for c in _changes_in(lines())] == [("e1", "suspended"), ("e2", "completed")]
