"""The status watcher (bench, chaos) passes on status announcements and skips anything else on
the topic: the chaos suite publishes poison there, and a watcher that died on it went blind."""

from __future__ import annotations

import json

from bench.watchers import _status_of


def test_a_status_announcement_is_read() -> None:
    value = json.dumps({"execution_id": "e1", "status": "suspended", "sequence": 3}).encode()
    assert _status_of(value) == ("e1", "suspended")


def test_poison_is_skipped() -> None:
    for value in (b"not json", b"", None, b"[1, 2]", b'{"execution_id": "e1"}', b"\xff\xfe"):
        assert _status_of(value) is None
